package runner

import (
	"fmt"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex"
)

// An Option configures a Runner. Nil options are ignored.
type Option interface{ apply(*config) }

// A JobOption configures one job. Nil options are ignored.
type JobOption interface{ applyJob(*jobConfig) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type jobOptionFunc func(*jobConfig)

func (f jobOptionFunc) applyJob(c *jobConfig) { f(c) }

type config struct {
	replica  string
	prefix   string
	clock    func() time.Time
	onError  func(name string, run Run, err error)
	shutdown time.Duration
	tp       trace.TracerProvider
	mp       metric.MeterProvider
	errs     []error
}

func newConfig(opts []Option) config {
	host, _ := os.Hostname()
	c := config{
		replica:  fmt.Sprintf("%s/%d", host, os.Getpid()),
		prefix:   "redfence:runner:",
		clock:    time.Now,
		shutdown: 30 * time.Second,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

// WithReplicaID names this replica in Last's records. Default host/pid; ""
// is an error.
func WithReplicaID(id string) Option {
	return optionFunc(func(c *config) {
		if id == "" {
			c.errs = append(c.errs, fmt.Errorf("empty replica id"))
		}
		c.replica = id
	})
}

// WithPrefix sets the prefix of the runner's own keys (slot claims and last
// runs, in Redis or the backend); job locks use the Locker's prefix. Default "redfence:runner:".
// As with mutex.WithPrefix, it must not contain '{' or '}', which would put
// every job's keys in one Cluster hash slot.
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) {
		if strings.ContainsAny(p, "{}") {
			c.errs = append(c.errs, fmt.Errorf("prefix %q contains a brace", p))
		}
		c.prefix = p
	})
}

// WithClock replaces the replica's clock (time.Now); nil is an error. Over
// a backend with a clock (backend.ServerClock: Redis) the runner reads it
// only to turn the server's slot boundaries into local timers; over one
// without (etcd) it counts the slots too. For tests of clock skew.
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now == nil {
			c.errs = append(c.errs, fmt.Errorf("nil clock"))
		}
		c.clock = now
	})
}

// WithErrorHook is called, from the job's goroutine, for every run that ends
// in an error (a panic included, as *PanicError) and for errors of Redis or
// the backend while claiming (with a zero Run). It must not block for long. Default, and for
// nil: none.
func WithErrorHook(fn func(name string, run Run, err error)) Option {
	return optionFunc(func(c *config) { c.onError = fn })
}

// WithShutdownTimeout bounds how long Run waits, after its ctx ends, for
// runs in progress before cancelling their contexts. Default 30 s; d must be
// positive.
func WithShutdownTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("shutdown timeout %v must be positive", d))
		}
		c.shutdown = d
	})
}

// WithTracerProvider sets where spans go. Default, and for nil (a typed nil
// such as a nil *sdktrace.TracerProvider included): the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets where metrics go. Default, and for nil (typed or
// not): the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// Missed is what happens to a slot whose time came while the job was still
// running (or nobody could run it).
type Missed int

const (
	// Skip drops the slot: the job runs again at the next slot it can
	// start on time. The default.
	Skip Missed = iota
	// RunOnce runs it late, once: the replica that claimed it waits for the
	// running job to finish (until the slot ends), then runs it. Several
	// missed slots still make one late run, never a queue. After an outage
	// the first replica back runs the current slot whatever its lateness.
	RunOnce
)

type jobConfig struct {
	jitter  time.Duration
	timeout time.Duration
	lockTTL time.Duration
	missed  Missed
	retries int
	offset  time.Duration
	loc     *time.Location // nil: UTC
	errs    []error
}

// WithOffset starts the job's slots d after the multiples of its interval,
// on the wall clock of WithLocation's zone (default UTC): with a 24 h
// interval, WithOffset(2*time.Hour) runs the job at 02:00 each day, with a
// 1 h interval WithOffset(15*time.Minute) at a quarter past each hour.
// Default 0; d must be at least 0, below the interval and a whole number of
// milliseconds.
func WithOffset(d time.Duration) JobOption {
	return jobOptionFunc(func(c *jobConfig) {
		if d < 0 || d%time.Millisecond != 0 {
			c.errs = append(c.errs, fmt.Errorf("offset %v is negative or not a whole number of milliseconds", d))
		}
		c.offset = d
	})
}

// WithLocation counts the job's slots on loc's wall clock instead of UTC's,
// so that a 24 h job with WithOffset(2*time.Hour) runs at 02:00 local time
// whether daylight saving time is in force or not. The server's clock still
// says when it is: loc only reads it. Where loc's clock jumps, slots follow
// it: when DST starts and the clock skips a slot's start (02:00 to 03:00),
// the slot starts at the jump (03:00 local), and slots that lie wholly in
// the skipped hour do not run; when DST ends and the clock repeats an hour,
// each slot still runs once (the repeat finds it claimed), so that hour's
// slots of an interval under an hour do not run twice. Such a day is 23 or
// 25 hours long, and so is a 24 h job's slot. Default, and for UTC: UTC,
// whose clock never jumps; nil is an error.
func WithLocation(loc *time.Location) JobOption {
	return jobOptionFunc(func(c *jobConfig) {
		if loc == nil {
			c.errs = append(c.errs, fmt.Errorf("nil location"))
		}
		c.loc = loc
	})
}

// WithJitter delays each run by a random duration in [0, d), spreading load
// when many jobs share a boundary. The slot is still the scheduled one.
// Default 0; d must not be negative and must be below the job's interval.
func WithJitter(d time.Duration) JobOption {
	return jobOptionFunc(func(c *jobConfig) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("negative jitter %v", d))
		}
		c.jitter = d
	})
}

// WithTimeout bounds each run: its ctx ends after d, which must be
// positive. Default: none (the lock's context still ends if the lock is
// lost).
func WithTimeout(d time.Duration) JobOption {
	return jobOptionFunc(func(c *jobConfig) {
		if d <= 0 {
			c.errs = append(c.errs, fmt.Errorf("timeout %v must be positive", d))
		}
		c.timeout = d
	})
}

// Bounds of WithTTL. Below mutex.MinTTL a lease would not outlast a round trip
// and the lock's drift margin; past an hour a replica that died mid-run would
// keep the job from the others for longer than renewal ever needs.
const (
	minTTL     = mutex.MinTTL
	maxLockTTL = time.Hour
)

// WithTTL sets the lease of the job's lock, renewed while the job runs.
// It is how long a replica that dies mid-run keeps the job from running
// elsewhere. Default 3 × the interval, at least 1 s and at most 30 s; Add
// accepts 10 ms to 1 h.
func WithTTL(d time.Duration) JobOption {
	return jobOptionFunc(func(c *jobConfig) {
		if d < minTTL || d > maxLockTTL {
			c.errs = append(c.errs, fmt.Errorf("lock TTL %v outside [%v, %v]", d, minTTL, maxLockTTL))
		}
		c.lockTTL = d
	})
}

// WithMissed sets the policy for slots that come while the job still runs.
// Default Skip.
func WithMissed(m Missed) JobOption {
	return jobOptionFunc(func(c *jobConfig) {
		if m != Skip && m != RunOnce {
			c.errs = append(c.errs, fmt.Errorf("unknown missed-slot policy %d", m))
		}
		c.missed = m
	})
}

// WithRetries retries a run that returned an error up to n more times within
// its slot, under the same lock and token (Run.Attempt counts from 1). The
// run's deadline (WithTimeout) covers all attempts. Default 0; n must not be
// negative.
func WithRetries(n int) JobOption {
	return jobOptionFunc(func(c *jobConfig) {
		if n < 0 {
			c.errs = append(c.errs, fmt.Errorf("negative retries %d", n))
		}
		c.retries = n
	})
}
