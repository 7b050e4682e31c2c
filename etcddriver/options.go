package etcddriver

import (
	"strings"
)

// defaultPrefix is the namespace a Driver's keys are under by default, the
// one redfence's Redis drivers use too.
const defaultPrefix = "redfence:"

// Option configures a Driver. Options are sealed; a nil Option is ignored.
type Option interface{ apply(*config) }

type config struct {
	prefix string
	base   int64
	err    error // the first bad option
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

func newConfig(opts []Option) (config, error) {
	c := config{prefix: defaultPrefix}
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

// WithPrefix sets the prefix of every etcd key the Driver writes: a lock
// key is the prefix and the Locker's key, and an election's journal sits
// beside it. Default "redfence:". It must not contain a NUL byte, which
// sets the Driver's own records apart from lock keys. List shows the keys
// under the prefix alone.
func WithPrefix(prefix string) Option {
	return optionFunc(func(c *config) {
		if strings.IndexByte(prefix, 0) >= 0 {
			c.fail(invalid("prefix %q has a NUL byte", prefix))
			return
		}
		c.prefix = prefix
	})
}

// WithTokenBase adds base to every token: a token is the holder key's
// create revision + base. Default 0; not negative.
//
// Use it when moving from a Redis Locker to etcd while fences keep the
// tokens they recorded: Redis tokens are at least the server's time in µs,
// and a fence refuses every token below the highest it saw. Pick a base
// above the highest token any fence recorded, for example the current time
// in µs at the move (time.Now().UnixMicro()) plus a margin for clock error,
// and never lower it afterwards: every Driver of one etcd cluster must use
// the same base, and a later base must not be smaller. Revisions stay far
// below 2^63 − base for any realistic cluster.
func WithTokenBase(base int64) Option {
	return optionFunc(func(c *config) {
		if base < 0 {
			c.fail(invalid("token base %d is negative", base))
			return
		}
		c.base = base
	})
}
