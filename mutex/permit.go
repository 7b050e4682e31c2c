package mutex

import (
	"context"
	"time"
)

// Permit is one permit of a Semaphore, held until Release, the Locker's
// Close, or its loss. It is renewed in the Locker's batches with its locks
// (WithAutoRenew), and its context ends when it is lost: a renewal found it
// gone, or its local lease deadline passed first. Its methods are safe for
// concurrent use; those of a nil, released or lost Permit return
// ErrNotHeld.
type Permit struct {
	lk *Lock // the Locker's machinery for a lease: renewal, deadline, loss signal
}

// Name returns the semaphore's name.
func (p *Permit) Name() string {
	if p == nil || p.lk == nil {
		return ""
	}
	return p.lk.key
}

// Token returns the permit's fencing token: strictly greater than that of
// every permit of the semaphore granted before it. Pass it to the
// protected resource (package fenced) so that it refuses a holder whose
// permit ran out and was granted again.
func (p *Permit) Token() int64 {
	if p == nil || p.lk == nil {
		return 0
	}
	return p.lk.token
}

// Context is done when the permit is lost (cause ErrLockLost) or released
// (cause ErrReleased); context.Cause tells which. Work done under the
// permit should use it. It carries the values of the ctx given to Acquire.
func (p *Permit) Context() context.Context {
	if p == nil || p.lk == nil {
		return (*Lock)(nil).Context()
	}
	return p.lk.ctx
}

// Join is Lock.Join for the permit: a context done when ctx is or the
// permit ends, whichever comes first.
func (p *Permit) Join(ctx context.Context) (context.Context, context.CancelFunc) {
	return join(p.Context(), ctx)
}

// Deadline returns the local lease deadline: the permit's context ends
// with ErrLockLost then unless a renewal succeeds first.
func (p *Permit) Deadline() time.Time {
	if p == nil || p.lk == nil {
		return time.Time{}
	}
	return p.lk.Deadline()
}

// Release gives the permit back and wakes the next waiter. It is
// idempotent: a second Release, or one after the permit was lost, returns
// ErrNotHeld and sends nothing; the backend, too, adds no permit for a
// permit it no longer holds. On a server error the permit is given up
// locally all the same (renewal stops, so its lease runs out within one
// TTL), one more release is tried in the background, and the error is
// returned.
func (p *Permit) Release(ctx context.Context) error {
	if p == nil || p.lk == nil {
		return ErrNotHeld
	}
	return releaseHeld(ctx, p.lk, "redfence.Permit.Release")
}
