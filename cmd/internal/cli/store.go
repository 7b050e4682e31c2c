package cli

import (
	"context"
	"errors"
	"flag"
	"time"

	"github.com/redfence/redfence/mutex"
)

// NewStore makes a Store whose flags are unset: Run makes one of each kind
// per run.
type NewStore func() Store

// A Store is a kind of server that holds redfence locks (Redis, etcd): its
// global flags, and the Locker the commands run over. A command line names
// at most one store's servers.
type Store interface {
	// Flags declares the store's global flags on fs. Run declares them on
	// the command line's head and on each command's flag set, on the same
	// variables, so that what the head set stays set.
	Flags(fs *flag.FlagSet)
	// Named reports whether the parsed flags (byFlag) or the environment
	// (byEnv) name servers of this store. Run uses the store the flags
	// name, else the one the environment names, else its first store.
	Named(env func(string) string) (byFlag, byEnv bool)
	// Resolve fills in, for the store Run uses, what comes from the
	// environment or a default, and checks what flag parsing cannot. A
	// mistake is a Usagef error: nothing is done, and the status is 2.
	Resolve(env func(string) string) error
	// Dial builds the Locker over the servers, its driver's keys under
	// prefix (the driver's WithPrefix) and the Locker with opts (the
	// command's owner info), sending nothing: watch shows a server that
	// does not answer frame after frame. A bad prefix or option is a
	// Usagef error. The caller closes the Conn.
	Dial(prefix string, opts ...mutex.Option) (Conn, error)
	// Usage is the store's part of the general usage: its flags' URL forms
	// and its environment variables, as indented lines under a heading.
	Usage() string
}

// Conn is a Locker over a store's servers, and what the commands say
// about those servers.
type Conn interface {
	Locker() *mutex.Locker
	// Probe checks, each call within timeout, that the servers are ones
	// the commands can look through (not a replica that shows a lock as
	// free, say); warn says what it could not check. Its error is worded
	// for an operator.
	Probe(ctx context.Context, timeout time.Duration, warn func(string)) error
	// Explain words err, returned by a call of the Locker that ran for
	// elapsed, for an operator: which server, what went wrong, how long
	// it waited. Bad input and an interruption are worded before it is
	// asked (explain).
	Explain(err error, elapsed time.Duration) error
	// Where names the servers in messages: "Redis at 127.0.0.1:6379".
	Where() string
	// Traits says how the store's locks are shown.
	Traits() Traits
	// Close ends the calls still out and closes the Locker and the clients
	// Dial made.
	Close()
}

// Traits is how a store's locks are shown.
type Traits struct {
	// Store names the store in labels: "Redis" ("redis key", "re-entries
	// in Redis"), "etcd".
	Store string
	// Nodes is how many independent nodes a lock needs a majority of
	// (Redlock's masters), each shown on its own; 1 for one deployment.
	Nodes int
	// NoQueue says why no waiters are shown when the store keeps no queue
	// of the Lockers waiting for a key ("Redlock keeps no queue"); "" when
	// it keeps one.
	NoQueue string
}

// explain words err, returned by a call of c's Locker that ran for
// elapsed: bad input as a usage error, Ctrl-C as an interruption, the rest
// as c's store words it.
func explain(c Conn, err error, elapsed time.Duration) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mutex.ErrInvalid):
		return usagef("", "%s", trimInvalid(err.Error()))
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	}
	return c.Explain(err, elapsed)
}
