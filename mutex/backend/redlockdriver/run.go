package redlockdriver

import (
	"context"
	"sync"
)

// runner owns the driver's goroutines: Close waits for them.
//
// A stand-in until mutex/internal/redisrt's Runner lands (branch d-redis);
// it is replaced by it, not kept beside it.
type runner struct {
	wg sync.WaitGroup
}

func newRunner() *runner { return &runner{} }

// Go runs fn in a goroutine the driver owns.
func (r *runner) Go(fn func()) { r.wg.Go(fn) }

// afterward runs fn in the background once an abandoned call (pending) has
// ended, so that fn comes after whatever that call did on the server, on a
// bounded context of its own, never on the caller's dead one.
func (r *runner) afterward(pending <-chan error, fn func(ctx context.Context)) {
	r.Go(func() {
		if pending != nil {
			<-pending
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		fn(ctx)
	})
}

func (r *runner) close() { r.wg.Wait() }
