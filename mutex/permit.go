package mutex

import (
	"context"
	"time"
)

// Permit is one permit of a Semaphore, held until Release, the Locker's
// Close, or its loss, and renewed in the Locker's batches (WithAutoRenew).
// Its methods are safe for concurrent use; those of a nil, released or
// lost Permit return ErrNotHeld.
type Permit struct {
	lk *Lock // the Locker's machinery for a lease: renewal, deadline, loss signal
}

// Key returns the semaphore's key.
func (p *Permit) Key() string {
	if p == nil || p.lk == nil {
		return ""
	}
	return p.lk.key
}

// Token returns the permit's fencing token: strictly greater than that of
// every permit of the semaphore granted before it.
func (p *Permit) Token() int64 {
	if p == nil || p.lk == nil {
		return 0
	}
	return p.lk.token
}

// Context is done when the permit is lost (cause ErrLockLost) or released
// (ErrReleased). It carries the values of the ctx given to Acquire.
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

// Deadline returns the permit's local lease deadline (Lock.Deadline).
func (p *Permit) Deadline() time.Time {
	if p == nil || p.lk == nil {
		return time.Time{}
	}
	return p.lk.Deadline()
}

// Release gives the permit back and wakes the next waiter. It is
// idempotent: a second Release, or one after a loss, returns ErrNotHeld and
// sends nothing, and the backend adds no permit it no longer holds. On a
// store error the permit is given up locally all the same and one more
// release is tried in the background.
func (p *Permit) Release(ctx context.Context) error {
	if p == nil || p.lk == nil {
		return ErrNotHeld
	}
	return releaseHeld(ctx, p.lk, "redfence.Permit.Release")
}
