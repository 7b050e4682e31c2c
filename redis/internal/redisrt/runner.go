package redisrt

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/workers"
)

// CleanupTimeout bounds a clean-up after a failed or abandoned call
// (Afterward), which runs on its own context, never on the caller's dead one.
const CleanupTimeout = 2 * time.Second

// Runner runs go-redis calls under their caller's deadline and owns the
// goroutines that takes (and every other background task of a driver): Close
// waits for all of them. It is safe for concurrent use.
//
// A client that applies ctx deadlines to its sockets (ContextTimeoutEnabled)
// needs no goroutine: its calls run on the caller's. One that does not would
// wait its ReadTimeout on a hung server, so a call under a ctx that can end
// runs in a goroutine the caller stops waiting for when ctx ends.
type Runner struct {
	ctxAware bool
	pool     *workers.Pool // every goroutine started by Go
}

// NewRunner returns a Runner for calls on a client that applies ctx
// deadlines to its sockets (ctxAware, see ContextAware) or not.
func NewRunner(ctxAware bool) *Runner {
	return &Runner{ctxAware: ctxAware, pool: workers.New()}
}

// Go runs fn in a goroutine the Runner owns (Close waits for it), reusing a
// parked one; once Close has begun, fn runs on the caller's goroutine.
func (r *Runner) Go(fn func()) { r.pool.Go(fn) }

// ContextAware reports whether c applies ctx deadlines to its sockets: a
// *redis.Client or *redis.ClusterClient built with ContextTimeoutEnabled.
// Any other client (a Ring, a wrapper) counts as not: its calls are bounded
// by a goroutine the caller can stop waiting for.
func ContextAware(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c != nil && c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c != nil && c.Options().ContextTimeoutEnabled
	}
	return false
}

// Direct reports whether a call under ctx can run on the caller's goroutine:
// the client applies ctx's deadline itself, or ctx cannot end. A driver
// calls go-redis itself then, without the closure Call takes (the
// uncontended path allocates less).
func (r *Runner) Direct(ctx context.Context) bool { return r.ctxAware || ctx.Done() == nil }

// Call runs fn under ctx's deadline. When Direct(ctx) is false, fn runs in a
// goroutine the Runner owns, and Call returns ctx.Err() when ctx ends first;
// pending then delivers fn's eventual result (once, buffered), so that a
// clean-up can wait for a command that might still reach the server. fn
// must not write anything the caller reads once pending is set, or the
// caller must read it only after pending delivered.
func (r *Runner) Call(ctx context.Context, fn func(context.Context) error) (pending <-chan error, err error) {
	return r.callIn(ctx, r.Direct(ctx), fn)
}

// Interruptible is Call for a call a person interrupts (inspection): a
// client that applies ctx's deadline to its sockets still does not stop
// reading when ctx is cancelled, so fn runs apart unless ctx cannot end.
func (r *Runner) Interruptible(ctx context.Context, fn func(context.Context) error) (pending <-chan error, err error) {
	return r.callIn(ctx, ctx.Done() == nil, fn)
}

func (r *Runner) callIn(ctx context.Context, direct bool, fn func(context.Context) error) (pending <-chan error, err error) {
	if direct {
		return nil, fn(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := make(chan error, 1)
	r.Go(func() { res <- fn(ctx) })
	select {
	case err := <-res:
		return nil, err
	case <-ctx.Done():
		return res, ctx.Err()
	}
}

// Afterward runs fn in the background, owned by the Runner: first it waits
// for pending (an abandoned call; nil for none) to end, so that fn comes
// after whatever that call did on the server, then it runs fn on a context
// of its own bounded by CleanupTimeout, never on the caller's dead one.
func (r *Runner) Afterward(pending <-chan error, fn func(ctx context.Context)) {
	r.Go(func() {
		if pending != nil {
			<-pending
		}
		ctx, cancel := context.WithTimeout(context.Background(), CleanupTimeout)
		defer cancel()
		fn(ctx)
	})
}

// Settled returns a channel closed once pending (a Call's) delivered; it
// consumes pending. Unlike pending it can be waited on any number of times.
// A nil pending is settled already.
func (r *Runner) Settled(pending <-chan error) <-chan struct{} {
	done := make(chan struct{})
	if pending == nil {
		close(done)
		return done
	}
	r.Go(func() {
		<-pending
		close(done)
	})
	return done
}

// Close makes parked goroutines leave and waits for every goroutine Go
// started, including calls still out to a hung server (a client without
// ContextTimeoutEnabled ends them at its ReadTimeout). After Close, Go runs
// its task on the caller's goroutine, so nothing outlives Close; Call then
// runs fn directly: a clean-up that Close waits for still reaches the
// server, and a call racing Close is bounded by the client's ReadTimeout
// rather than by its ctx. Close is idempotent.
func (r *Runner) Close() { r.pool.Close() }
