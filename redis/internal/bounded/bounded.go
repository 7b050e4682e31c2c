// Package bounded makes a go-redis call return by its ctx's deadline
// whatever the client does: the adapters' one way to do it (package mutex
// has its own, which also reports a call it stopped waiting for).
package bounded

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Call runs fn, and returns by ctx's deadline whatever the client does. A
// client that applies ctx deadlines to its sockets (go-redis's
// ContextTimeoutEnabled; aware) ends the call then itself; any other waits
// its ReadTimeout on a hung server, however near
// the deadline. With such a client fn runs on a goroutine of its own, which
// Call stops waiting for at the deadline: the goroutine ends when the
// client ends the call (its ReadTimeout, or Close), its result is dropped,
// and calls counts it until then, for its owner to wait for.
func Call(ctx context.Context, aware bool, calls *sync.WaitGroup, fn func(ctx context.Context) error) error {
	if aware {
		return fn(ctx)
	}
	res := make(chan error, 1) // never blocks an abandoned call
	calls.Add(1)
	go func() {
		defer calls.Done()
		res <- fn(ctx)
	}()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Aware reports whether c applies ctx deadlines to its sockets.
func Aware(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	}
	return false // a Ring, or a client of the caller's own making
}
