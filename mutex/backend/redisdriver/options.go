package redisdriver

import (
	"strings"
	"time"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// Option configures a Driver.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix   string
	fenceTTL time.Duration
	err      error
}

func newConfig(opts []Option) (config, error) {
	c := config{prefix: redisproto.DefaultPrefix, fenceTTL: redisproto.DefaultFenceTTL}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c, c.err
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// WithPrefix sets the prefix of every Redis key and channel the Driver
// uses. Default "redfence:". It must not contain '{' or '}'.
func WithPrefix(prefix string) Option {
	return optionFunc(func(c *config) {
		if strings.ContainsAny(prefix, "{}") {
			c.fail(invalid("prefix %q contains a brace", prefix))
			return
		}
		c.prefix = prefix
	})
}

// WithFenceTTL sets how long a key's fencing counter outlives its last use.
// Default 1 hour; at least one second. Tokens stay monotonic
// after it expires: every token is also at least the server's time in µs.
func WithFenceTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Second {
			c.fail(invalid("fence TTL %v is below 1s", d))
			return
		}
		c.fenceTTL = d
	})
}
