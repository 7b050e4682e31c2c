package mutex

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redfence/redfence/mutex/backend"
)

// RWHold is one hold of an RWMutex, a read or the write, held as a Permit
// is. Its methods are safe for concurrent use; those of a nil, released or
// lost RWHold return ErrNotHeld.
type RWHold struct {
	lk *Lock // the Locker's machinery for a lease
}

// rwHold is the holdKind of an RWHold's Lock.
type rwHold struct {
	rw    *RWMutex
	write atomic.Bool // false once downgraded
}

func (h *rwHold) family() holdFamily { return familyRW }
func (h *rwHold) queueKey() string   { return h.rw.qkey }

func (h *rwHold) releaseHold(ctx context.Context, ls backend.Lease) (bool, error) {
	return h.rw.l.drv.rw.ReleaseRW(ctx, ls)
}

func (h *rwHold) extendHolds(ctx context.Context, ls []backend.Lease) ([]backend.Renewal, error) {
	return h.rw.l.drv.rw.ExtendRW(ctx, ls)
}

// rwMode is HeldLock.RW of lk.
func rwMode(lk *Lock) string {
	h, ok := lk.kind.(*rwHold)
	switch {
	case !ok:
		return ""
	case h.write.Load():
		return "write"
	}
	return "read"
}

// Key returns the read-write lock's key.
func (h *RWHold) Key() string {
	if h == nil || h.lk == nil {
		return ""
	}
	return h.lk.key
}

// Write reports whether h holds the write (false for a read, and after
// Downgrade).
func (h *RWHold) Write() bool {
	return h != nil && h.lk != nil && h.lk.kind.(*rwHold).write.Load()
}

// Token returns the hold's token: for the write, strictly greater than
// every earlier write's of the RWMutex; for a read, the last write's (0
// when none). A downgraded hold keeps its write's token.
func (h *RWHold) Token() int64 {
	if h == nil || h.lk == nil {
		return 0
	}
	return h.lk.token
}

// Context is done when the hold is lost (ErrLockLost) or released
// (ErrReleased). It carries the hold: RLock or Lock through it are refused
// at once (ErrUpgrade, ErrInvalid) rather than waiting for themselves.
func (h *RWHold) Context() context.Context {
	if h == nil || h.lk == nil {
		return (*Lock)(nil).Context()
	}
	return h.lk.ctx
}

// Join is Lock.Join for the hold: a context done when ctx is or the hold
// ends, whichever comes first.
func (h *RWHold) Join(ctx context.Context) (context.Context, context.CancelFunc) {
	return join(h.Context(), ctx)
}

// Deadline returns the hold's local lease deadline (Lock.Deadline).
func (h *RWHold) Deadline() time.Time {
	if h == nil || h.lk == nil {
		return time.Time{}
	}
	return h.lk.Deadline()
}

// Release gives the hold back and wakes the next waiter. It is idempotent
// as Permit.Release is: a second Release returns ErrNotHeld and sends
// nothing; on a server error the hold is given up locally all the same.
func (h *RWHold) Release(ctx context.Context) error {
	if h == nil || h.lk == nil {
		return ErrNotHeld
	}
	return releaseHeld(ctx, h.lk, "redfence.RWHold.Release")
}

// Downgrade makes the write hold a read hold in one step, keeping its token
// and context: no writer comes between, and waiting readers are woken. A
// read hold returns ErrInvalid. On a store error the outcome is unknown and
// Write still reports true; call Downgrade again to know.
func (h *RWHold) Downgrade(ctx context.Context) error {
	if h == nil || h.lk == nil {
		return ErrNotHeld
	}
	lk := h.lk
	if err := lk.usable(ctx); err != nil {
		return err
	}
	k := lk.kind.(*rwHold)
	if !k.write.Load() {
		return invalid("Downgrade of a read hold of %q", lk.key)
	}
	l := lk.l
	if !l.now().Before(lk.Deadline()) {
		lk.lose("lease deadline passed")
		return ErrNotHeld
	}
	ctx, span := l.tel.startSpan(ctx, "redfence.RWHold.Downgrade", lk.key, lk.token)
	ok, err := l.drv.rw.DowngradeRW(ctx, lease(lk))
	switch {
	case err != nil:
		endSpan(span, "error", err)
		return unavailable(err)
	case !ok:
		lk.lose("downgrade found the write gone")
		endSpan(span, "not_held", ErrNotHeld)
		return ErrNotHeld
	}
	k.write.Store(false)
	l.wakeAfterRelease(k.queueKey())
	endSpan(span, "downgraded", nil)
	return nil
}
