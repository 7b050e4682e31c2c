package mutex

import (
	"reflect"
	"strings"
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
	prefix      string
	fenceTTL    time.Duration
	nodeTimeout time.Duration // Redlock: per-node call timeout; 0 = derived from the TTL
	driftFactor float64
	driftMin    time.Duration
	now         func() time.Time
	tp          trace.TracerProvider
	mp          metric.MeterProvider
	info        OwnerInfo
	err         error // first bad option, reported by every call
}

// defaultFenceTTL is WithFenceTTL's default, and the Redis drivers' (whose
// acquire script knows it, so that the common call need not send it).
const defaultFenceTTL = time.Hour

func newConfig(opts []Option) config {
	c := config{prefix: "redfence:", fenceTTL: defaultFenceTTL, driftFactor: 0.01, driftMin: 2 * time.Millisecond, now: time.Now}
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

// WithPrefix sets the prefix of every Redis key and channel the Locker uses.
// Default "redfence:". It must not contain '{' or '}', which would change the
// Cluster hash slot of the keys.
func WithPrefix(prefix string) Option {
	return optionFunc(func(c *config) {
		if strings.ContainsAny(prefix, "{}") {
			c.fail(invalid("prefix %q contains a brace", prefix))
			return
		}
		c.prefix = prefix
	})
}

// OwnerInfo says which process holds or waits for a lock, for the people
// who inspect it (Locker.Inspect, the redfence command). It travels inside
// the owner ids the Locker writes, so it costs no extra command.
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
// WithOwner keep the caller's id as it is and show no OwnerInfo.
func WithOwnerInfo(info OwnerInfo) Option {
	return optionFunc(func(c *config) {
		if info.PID < 0 {
			c.fail(invalid("negative pid %d in OwnerInfo", info.PID))
			return
		}
		c.info = info
	})
}

// WithFenceTTL sets how long a key's fencing counter outlives its last use.
// Default 1 hour. Tokens stay monotonic after it expires because every token
// is also at least the Redis server's time in microseconds; the counter only
// has to cover clock steps backwards and several acquisitions within one
// microsecond. Must be at least one second.
func WithFenceTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Second {
			c.fail(invalid("fence TTL %v is below 1s", d))
			return
		}
		c.fenceTTL = d
	})
}

// WithClockDrift sets the margin for clock-rate differences between this
// process and Redis: factor × TTL + min, taken off every lease (the local
// deadline) and, for Redlock, off the validity of an acquisition. Default
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

// WithClock replaces the Locker's clock (time.Now) for everything it times
// locally: lease deadlines, renewal schedules, Redlock validity. For tests of
// clock drift: a clock running slower than the drift margin allows keeps a
// holder believing in a lease Redis has already ended. Timers still run on
// real time and re-check the clock when they fire.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now == nil {
			c.fail(invalid("nil clock"))
			return
		}
		c.now = now
	})
}

// WithNodeTimeout bounds each Redlock node's reply to one call (acquire,
// extend, release), enforced by redfence whatever the client's
// ContextTimeoutEnabled says. Default: TTL/20, between 5ms and 500ms. A node
// that does not answer within it rests for a while (see NewRedlock). Ignored
// by a single-deployment Locker, whose calls run under the caller's ctx.
func WithNodeTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.fail(invalid("node timeout %v must be positive", d))
			return
		}
		c.nodeTimeout = d
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
	c := lockConfig{ttl: 10 * time.Second, autoRenew: true, retryMin: 50 * time.Millisecond, retryMax: time.Second}
	for _, o := range opts {
		if o != nil {
			o.applyLock(&c)
		}
	}
	return c
}

func (c *lockConfig) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithTTL sets the lease: how long the lock stays held without renewal.
// Default 10s; from MinTTL to MaxTTL, in whole milliseconds. With
// auto-renewal the lease is extended every TTL/3, so a holder that dies
// frees the lock within one TTL; a job that runs for hours keeps a short
// lease renewed rather than a long one.
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

// WithRetry sets the fallback backoff of Lock between attempts when no
// release notification arrives: exponential from min to max with full jitter,
// and never longer than the holder's remaining lease. Default 50ms to 1s.
// Notifications, not this backoff, wake waiters in the normal case. The
// backoff state belongs to one call.
func WithRetry(min, max time.Duration) LockOption {
	return lockOptionFunc(func(c *lockConfig) {
		if min <= 0 || max < min {
			c.fail(invalid("retry backoff needs 0 < min <= max, got %v, %v", min, max))
			return
		}
		c.retryMin, c.retryMax = min, max
	})
}

// WithOwner sets an explicit owner identity: an acquisition with an id that
// already holds the lock re-enters it (count+1, same token), in this process
// or another. Default: a random id per acquisition, so only
// Lock(lk.Context(), key) re-enters.
func WithOwner(id string) LockOption {
	return lockOptionFunc(func(c *lockConfig) {
		if id == "" || len(id) > 512 {
			c.fail(invalid("owner id must have 1 to 512 bytes"))
			return
		}
		c.owner = id
	})
}

// WithReplicaAck makes an acquisition wait until n replicas acknowledged it
// (Redis WAIT), for at most timeout; with fewer acks the lock is released and
// the call fails. Best effort: WAIT does not make Redis strongly consistent,
// and a failover can still lose an acknowledged lock. Default off.
func WithReplicaAck(n int, timeout time.Duration) LockOption {
	return lockOptionFunc(func(c *lockConfig) {
		if n < 0 || timeout < 0 || (n > 0 && timeout == 0) {
			c.fail(invalid("replica ack needs n >= 0 and a positive timeout, got %d, %v", n, timeout))
			return
		}
		c.replicas, c.replicaTTL = n, timeout
	})
}
