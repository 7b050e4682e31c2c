package redlockdriver

import (
	"time"

	"github.com/redfence/redfence/redis/internal/redisproto"
)

// Option configures a Driver.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	redisproto.KeyConfig
	storeTimeout time.Duration // 0: derived from the lease
	now          func() time.Time
}

func newConfig(opts []Option) (config, error) {
	c := config{KeyConfig: redisproto.DefaultKeyConfig(), now: time.Now}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c, c.Err
}

// WithPrefix sets the prefix of every Redis key and channel the Driver
// uses. Default "redfence:". It must not contain '{' or '}'.
func WithPrefix(prefix string) Option {
	return optionFunc(func(c *config) { c.SetPrefix(prefix, invalid) })
}

// WithFenceTTL sets how long a key's fencing counter outlives its last use
// on each node. Default 1 hour; at least one second. Tokens stay monotonic
// after it expires: every token is also at least the node's time in µs.
func WithFenceTTL(d time.Duration) Option {
	return optionFunc(func(c *config) { c.SetFenceTTL(d, invalid) })
}

// WithStoreTimeout bounds each node's reply to one call (acquire, extend,
// release), enforced by the driver whatever the clients'
// ContextTimeoutEnabled says. Default: the lease/20, between 5ms and
// 500ms. A node that does not answer within it rests (see New).
func WithStoreTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.Fail(invalid("store timeout %v must be positive", d))
			return
		}
		c.storeTimeout = d
	})
}

// WithClock replaces time.Now for what the driver times itself: a grant's
// validity and the nodes' rests. For tests; give the Locker the same clock
// (mutex.WithClock).
func WithClock(now func() time.Time) Option {
	return optionFunc(func(c *config) {
		if now == nil {
			c.Fail(invalid("nil clock"))
			return
		}
		c.now = now
	})
}
