package election

import (
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Option configures an Election. Options are sealed; a nil one is ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// The defaults are client-go leaderelection's.
const (
	DefaultTTL           = 15 * time.Second
	DefaultRenewDeadline = 10 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	// JitterFactor is the slack a retry period gets: the renew deadline
	// must exceed JitterFactor × the retry period (client-go's rule), so
	// that a leader tries to renew at least once before it gives up.
	JitterFactor = 1.2
	// MaxValueLen bounds a candidate's value: it travels in the lock's
	// owner id, written with every acquisition.
	MaxValueLen = 256
)

type config struct {
	lease     time.Duration
	renew     time.Duration
	retry     time.Duration
	lockDelay time.Duration
	onStarted func(*Term)
	onStopped func(*Term, error)
	tp        trace.TracerProvider
	mp        metric.MeterProvider
	err       error
}

func newConfig(opts []Option) config {
	c := config{lease: DefaultTTL, renew: DefaultRenewDeadline, retry: DefaultRetryPeriod}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithTTL sets the lease of the election's lock, its TTL: how long a
// leader that stopped renewing (paused, crashed, cut off) keeps others from
// leading. Default 15s; within mutex.MinTTL..mutex.MaxTTL.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(c *config) { c.lease = d })
}

// WithRenewDeadline sets how long a leader goes on without a successful
// renewal before its term ends (its context is cancelled with ErrLost).
// Default 10s. It must be shorter than the lease minus the Locker's clock
// drift margin: the difference is the time a deposed leader's work has to
// notice and stop before another can lead.
func WithRenewDeadline(d time.Duration) Option {
	return optionFunc(func(c *config) { c.renew = d })
}

// WithRetryPeriod sets how often a leader renews its lease, and how often a
// candidate polls a held lock when no release notification comes (the
// Locker's retry backoff) and an observer without a journal polls. Default
// 2s. The renew deadline must exceed JitterFactor times it.
func WithRetryPeriod(d time.Duration) Option {
	return optionFunc(func(c *config) { c.retry = d })
}

// WithLockDelay makes a candidate that wins the lock after an unclean loss
// (the last term was lost, not resigned) hold it for d before its term
// begins: no new term for d, which gives a deposed leader that did not
// notice its loss that long to stop (Chubby's and Consul's lock-delay).
// Default 0: none. Without a term journal (backend.TermJournal) the
// election cannot tell a clean end from a loss, and every term waits d;
// likewise when the journal is empty: a new election's first term, a
// journal expired (24 h after its last entry) or lost with its server.
func WithLockDelay(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.fail(invalid("lock delay %v is negative", d))
			return
		}
		c.lockDelay = d
	})
}

// WithOnStarted sets a function called once per term, when it begins,
// before Campaign returns it, on Campaign's goroutine. Default none.
func WithOnStarted(fn func(*Term)) Option {
	return optionFunc(func(c *config) { c.onStarted = fn })
}

// WithOnStopped sets a function called once per term that began, when it
// ended (its context done), with the context's cause, after OnStarted
// returned, on the term's own goroutine. Term.Release waits for it, so it
// must not call Release. Default none.
func WithOnStopped(fn func(*Term, error)) Option {
	return optionFunc(func(c *config) { c.onStopped = fn })
}

// WithTracerProvider sets the source of spans. Default, and for nil (typed
// or not): otel's global.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets the source of metrics. Default, and for nil (typed
// or not): otel's global.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}
