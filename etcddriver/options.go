package etcddriver

// Option configures a Backend. Options are sealed; a nil Option is ignored.
type Option interface{ apply(*config) }

type config struct {
	base int64
}

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// WithTokenBase adds base to every token: a token is the holder key's
// create revision + base. Default 0.
//
// Use it when moving from a Redis Locker to etcd while fences keep the
// tokens they recorded: Redis tokens are at least the server's time in µs
// (about 1.8e15 in 2026), and a fence refuses every token below the highest
// it saw. Pick a base above the highest token any fence recorded, for
// example the current time in µs at the move (time.Now().UnixMicro()) plus
// a margin for clock error, and never lower it afterwards: every Backend of
// one etcd cluster must use the same base, and a later base must not be
// smaller. Revisions stay far below 2^63 − base for any realistic cluster.
// A negative base makes every call fail with ErrInvalid.
func WithTokenBase(base int64) Option {
	return optionFunc(func(c *config) { c.base = base })
}
