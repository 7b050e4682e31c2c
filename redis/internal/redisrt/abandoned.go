package redisrt

import (
	"context"
	"slices"
	"sync"
)

// Abandoned registers calls a caller stopped waiting for (a Call's pending),
// by an id of the driver's choosing (an attempt's owner), so that a later
// clean-up for that id comes after them: backend.Backend's Abandon runs
// after the abandoned attempt's call returned, not merely after the caller
// gave up on it. It is safe for concurrent use.
//
// Lock order: mu is a leaf.
type Abandoned struct {
	r     *Runner
	mu    sync.Mutex
	calls map[string][]chan struct{} // by id; each closed when its call ended
}

// NewAbandoned returns an empty registry whose goroutines r owns.
func NewAbandoned(r *Runner) *Abandoned {
	return &Abandoned{r: r, calls: map[string][]chan struct{}{}}
}

// Add registers pending (consuming it) under id until it delivers; a nil
// pending is not registered. Several calls may be registered under one id
// (Redlock: one per node).
func (a *Abandoned) Add(id string, pending <-chan error) {
	if pending == nil {
		return
	}
	done := make(chan struct{})
	a.mu.Lock()
	a.calls[id] = append(a.calls[id], done)
	a.mu.Unlock()
	a.r.Go(func() {
		<-pending
		a.mu.Lock()
		calls := slices.DeleteFunc(a.calls[id], func(c chan struct{}) bool { return c == done })
		if len(calls) == 0 {
			delete(a.calls, id)
		} else {
			a.calls[id] = calls
		}
		a.mu.Unlock()
		close(done)
	})
}

// Done returns a channel closed once every call registered under id when
// Done was called has ended; nil when none is.
func (a *Abandoned) Done(id string) <-chan struct{} {
	a.mu.Lock()
	calls := slices.Clone(a.calls[id])
	a.mu.Unlock()
	switch len(calls) {
	case 0:
		return nil
	case 1:
		return calls[0]
	}
	done := make(chan struct{})
	a.r.Go(func() {
		for _, c := range calls {
			<-c
		}
		close(done)
	})
	return done
}

// Wait returns once every call registered under id when Wait began has
// ended, or with ctx.Err() when ctx ends first. It returns nil at once when
// none is registered.
func (a *Abandoned) Wait(ctx context.Context, id string) error {
	done := a.Done(id)
	if done == nil {
		return nil
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Len is how many calls are registered: for tests.
func (a *Abandoned) Len() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, c := range a.calls {
		n += len(c)
	}
	return n
}
