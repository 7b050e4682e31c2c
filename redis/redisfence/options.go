package redisfence

import (
	"strings"
	"time"
	"unicode/utf8"
)

// An Option configures a Fence. Nil options are ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	prefix   string
	ttl      time.Duration
	attempts int
	err      error // the first bad option
}

func (c *config) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}

// DefaultPrefix starts every fence key unless WithPrefix says otherwise.
const DefaultPrefix = "redfence:fence:"

// DefaultAttempts is how many times Do tries a write that loses WATCH races,
// unless WithAttempts says otherwise.
const DefaultAttempts = 16

// WithPrefix sets the prefix of the fence keys: resource r's fence is
// prefix + Tag(r) (followed by r when Tag hashes it). The prefix must be 1
// to MaxResourceLen bytes of valid UTF-8 without braces, which would move
// the hash tag; New reports any other as ErrInvalid. Default:
// DefaultPrefix.
func WithPrefix(prefix string) Option {
	return optionFunc(func(c *config) {
		switch {
		case prefix == "":
			c.fail(invalid("empty prefix: fence keys would be bare hash tags, which data keys could be too"))
		case len(prefix) > MaxResourceLen:
			c.fail(invalid("prefix is %d bytes, over the limit of %d", len(prefix), MaxResourceLen))
		case !utf8.ValidString(prefix):
			c.fail(invalid("prefix %q is not valid UTF-8", clip(prefix)))
		case strings.ContainsAny(prefix, "{}"):
			c.fail(invalid("prefix %q contains a brace, which would move the fence key's hash tag", clip(prefix)))
		default:
			c.prefix = prefix
		}
	})
}

// WithFenceTTL makes every fence key expire at least d, and at most 1.5 d,
// after the last write accepted for its resource: an accepted write sets a
// TTL of 1.5 d, except that one with the token the key holds already
// leaves the key alone while 1.25 d or more is left (so that writers
// sharing a token do not make each other retry). A TTL never shortens a fence: a key
// without expiry (written by a Fence without WithFenceTTL) keeps none, and
// one with more than 1.5 d left keeps it. Default: fence keys never expire, which is the safe choice: once a resource's fence has
// expired, the next write is accepted whatever its token, so a holder that
// wakes up late with an old token writes over newer data. Set d only when
// resources come and go in numbers that matter, and longer than any writer
// of a resource can be late: the longest lease plus the longest pause (GC,
// swap, a stalled network) a holder may sleep through, with a wide margin.
// d must be at least one second.
func WithFenceTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Second {
			c.fail(invalid("fence TTL %v is below 1s", d))
			return
		}
		c.ttl = d
	})
}

// WithAttempts sets how many times Do tries one write before it gives up
// with ErrContended: each attempt after the first follows a WATCH race lost
// to another writer of the same keys, and a short, growing, jittered pause.
// n must be from 1 to 1000. Default: DefaultAttempts.
func WithAttempts(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 || n > 1000 {
			c.fail(invalid("attempts %d is outside 1 to 1000", n))
			return
		}
		c.attempts = n
	})
}
