package redisdriver

import (
	"time"

	"github.com/redfence/redfence/redis/internal/redisproto"
)

// Option configures a Driver.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct{ redisproto.KeyConfig }

func newConfig(opts []Option) (config, error) {
	c := config{redisproto.DefaultKeyConfig()}
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

// WithFenceTTL sets how long a key's fencing counter outlives its last use.
// Default 1 hour; at least one second. Tokens stay monotonic
// after it expires: every token is also at least the server's time in µs.
func WithFenceTTL(d time.Duration) Option {
	return optionFunc(func(c *config) { c.SetFenceTTL(d, invalid) })
}
