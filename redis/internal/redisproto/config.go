package redisproto

import (
	"strings"
	"time"
)

// KeyConfig is what both Redis drivers configure alike: their keys' prefix
// and their fencing counters' life. Each driver embeds it in its own config
// and documents the options for its own servers.
type KeyConfig struct {
	Prefix   string
	FenceTTL time.Duration
	Err      error // the first bad option's
}

// DefaultKeyConfig is KeyConfig with both drivers' defaults.
func DefaultKeyConfig() KeyConfig {
	return KeyConfig{Prefix: DefaultPrefix, FenceTTL: DefaultFenceTTL}
}

// Fail keeps err unless an earlier option failed: the first mistake is the
// one reported.
func (c *KeyConfig) Fail(err error) {
	if c.Err == nil {
		c.Err = err
	}
}

// SetPrefix sets Prefix, refusing a brace (it would break the keys' hash
// tags); bad words the error as the driver's invalid argument.
func (c *KeyConfig) SetPrefix(prefix string, bad func(format string, args ...any) error) {
	if strings.ContainsAny(prefix, "{}") {
		c.Fail(bad("prefix %q contains a brace", prefix))
		return
	}
	c.Prefix = prefix
}

// SetFenceTTL sets FenceTTL, refusing less than a second: the floor both
// drivers document.
func (c *KeyConfig) SetFenceTTL(d time.Duration, bad func(format string, args ...any) error) {
	if d < time.Second {
		c.Fail(bad("fence TTL %v is below 1s", d))
		return
	}
	c.FenceTTL = d
}
