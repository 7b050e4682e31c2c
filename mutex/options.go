package mutex

import (
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures a Locker.
type Option interface{ apply(*config) }

// LockOption configures one Lock, TryLock or Do call.
type LockOption interface{ applyLock(*lockConfig) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type lockOptionFunc func(*lockConfig)

func (f lockOptionFunc) applyLock(c *lockConfig) { f(c) }

type config struct {
	driftFactor float64
	driftMin    time.Duration
	now         func() time.Time
	tp          trace.TracerProvider
	mp          metric.MeterProvider
	info        OwnerInfo
	renewSpans  bool
	err         error // first bad option, reported by every call
}

func newConfig(opts []Option) config {
	c := config{driftFactor: 0.01, driftMin: 2 * time.Millisecond, now: time.Now}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	// A typed nil (a nil *sdktrace.TracerProvider) means the global too: its
	// methods would panic.
	if isNilPointer(c.tp) {
		c.tp = otel.GetTracerProvider()
	}
	if isNilPointer(c.mp) {
		c.mp = otel.GetMeterProvider()
	}
	return c
}

// isNilPointer reports whether v is nil or holds a nil pointer. The other
// packages share internal/typednil; mutex imports none of our internal packages.
func isNilPointer(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	return rv.Kind() == reflect.Pointer && rv.IsNil()
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// OwnerInfo says which process holds or waits for a lock, for operators
// (mutex/admin, the redfence command). It travels inside the owner ids the
// Locker writes, so it costs no extra command.
type OwnerInfo struct {
	Service string // what runs: "billing-worker"
	Host    string // default: os.Hostname
	PID     int    // default: os.Getpid
	Label   string // anything else worth seeing: a version, a pod, a job id
}

// maxOwnerInfo bounds the encoded OwnerInfo: it is written with every
// acquisition, so a long one costs every Lock.
const maxOwnerInfo = 256

// WithOwnerInfo sets what inspection shows about this Locker's process.
// Empty Host and zero PID are filled in with the defaults. Default: host
// and pid only. Its encoded form is limited to 256 bytes. Locks taken
// WithOwner keep the caller's id as it is and show no OwnerInfo, unless
// the id was made with admin.OwnerID (as election's are).
func WithOwnerInfo(info OwnerInfo) Option {
	return optionFunc(func(c *config) {
		if info.PID < 0 {
			c.fail(invalid("negative pid %d in OwnerInfo", info.PID))
			return
		}
		c.info = info
	})
}

// WithClockDrift sets the margin for clock-rate differences between this
// process and the store: factor × TTL + min, taken off every lease (the
// local deadline) and, for Redlock, off the validity of an acquisition. Default
// 0.01 × TTL + 2ms. factor must be in [0, 0.5) and min non-negative.
func WithClockDrift(factor float64, min time.Duration) Option {
	return optionFunc(func(c *config) {
		if factor < 0 || factor >= 0.5 || min < 0 {
			c.fail(invalid("clock drift needs 0 <= factor < 0.5 and min >= 0, got %v, %v", factor, min))
			return
		}
		c.driftFactor, c.driftMin = factor, min
	})
}

// WithClock replaces the Locker's clock (time.Now) for what it times
// locally: lease deadlines and renewal schedules. For tests of clock drift;
// timers still run on real time and re-check the clock when they fire.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now == nil {
			c.fail(invalid("nil clock"))
			return
		}
		c.now = now
	})
}

// WithTracerProvider sets the source of spans. Default, and for nil (a typed
// nil such as a nil *sdktrace.TracerProvider included): otel's global, as it
// is at each call: spans start once the program installs a provider (before
// or after New), and none are made while it has not (they could not record).
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the source of metrics. Default, and for nil (typed
// or not): otel's global.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// WithRenewalSpans makes every renewal a span. Default false: renewals are
// counted (redfence.lock.renewals) and only a failed or late one is a span.
func WithRenewalSpans(on bool) Option {
	return optionFunc(func(c *config) { c.renewSpans = on })
}

type lockConfig struct {
	ttl        time.Duration
	autoRenew  bool
	retryMin   time.Duration
	retryMax   time.Duration
	owner      string
	replicas   int
	replicaTTL time.Duration
	err        error
}

func newLockConfig(opts []LockOption) lockConfig {
	var c lockConfig
	c.init(opts)
	return c
}

// init sets c to the defaults with opts applied, in place: a config inside
// an object on the heap (an acquisition) then costs no allocation of its
// own, as a local one handed to the options' methods would.
func (c *lockConfig) init(opts []LockOption) {
	*c = lockConfig{ttl: 10 * time.Second, autoRenew: true, retryMin: 50 * time.Millisecond, retryMax: time.Second}
	for _, o := range opts {
		if o != nil {
			o.applyLock(c)
		}
	}
}

func (c *lockConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithTTL sets the lease: how long the lock stays held without renewal.
// Default 10s; from MinTTL to MaxTTL, in whole milliseconds. Renewal
// extends it every TTL/3, so a holder that dies frees the lock within one
// TTL.
func WithTTL(d time.Duration) LockOption {
	return lockOptionFunc(func(c *lockConfig) {
		if err := checkTTL(d); err != nil {
			c.fail(err)
			return
		}
		c.ttl = d.Truncate(time.Millisecond)
	})
}

// The range of a lease (WithTTL, Lock.Extend). Below MinTTL a lease would
// not outlast a round trip and the drift margin; above MaxTTL it is almost
// surely a unit mistake, and a crashed holder would block the key for days.
const (
	MinTTL = 10 * time.Millisecond
	MaxTTL = 24 * time.Hour
)

func checkTTL(d time.Duration) error {
	if d < MinTTL || d > MaxTTL {
		return invalid("TTL %v is outside %v..%v", d, MinTTL, MaxTTL)
	}
	return nil
}

// WithAutoRenew turns auto-renewal on or off. Default on. Without it the
// lock's context is still cancelled with ErrLockLost at the local lease
// deadline; Extend prolongs it.
func WithAutoRenew(on bool) LockOption {
	return lockOptionFunc(func(c *lockConfig) { c.autoRenew = on })
}

// WithRetry sets the fallback backoff of a waiting call when no release
// notice arrives: exponential from min to max with full jitter, never
// longer than the holder's remaining lease, its state the call's own.
// Default 50ms to 1s.
func WithRetry(min, max time.Duration) LockOption {
	return lockOptionFunc(func(c *lockConfig) {
		if min <= 0 || max < min {
			c.fail(invalid("retry backoff needs 0 < min <= max, got %v, %v", min, max))
			return
		}
		c.retryMin, c.retryMax = min, max
	})
}

// WithOwner sets an explicit owner identity: an acquisition with the id of
// the holder re-enters (count+1, same token), in this process or another.
// Default: a random id per acquisition.
func WithOwner(id string) LockOption {
	return lockOptionFunc(func(c *lockConfig) {
		if id == "" || len(id) > 512 {
			c.fail(invalid("owner id must have 1 to 512 bytes"))
			return
		}
		c.owner = id
	})
}

// WithReplicaAck makes an acquisition wait up to timeout until n replicas
// acknowledged it (Redis WAIT); with fewer the lock is released and the
// call fails. Best effort: a failover can still lose an acknowledged lock.
func WithReplicaAck(n int, timeout time.Duration) LockOption {
	return lockOptionFunc(func(c *lockConfig) {
		if n < 0 || timeout < 0 || (n > 0 && timeout == 0) {
			c.fail(invalid("replica ack needs n >= 0 and a positive timeout, got %d, %v", n, timeout))
			return
		}
		c.replicas, c.replicaTTL = n, timeout
	})
}
