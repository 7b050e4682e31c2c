package mutex

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/redfence/redfence/mutex/backend"
)

// RWHold is one hold of an RWMutex, a read or the write, held until Unlock,
// the Locker's Close, or its loss. It is renewed in the Locker's batches
// (WithAutoRenew), and its context ends when it is lost. Its methods are
// safe for concurrent use; those of a nil, released or lost RWHold return
// ErrNotHeld.
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

// Name returns the read-write lock's name.
func (h *RWHold) Name() string {
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
// that of every write of the RWMutex granted before it; for a read, the
// token of the last write granted before it (0 when none), which a
// resource can compare with what it last saw written. A downgraded hold
// keeps its write's token.
func (h *RWHold) Token() int64 {
	if h == nil || h.lk == nil {
		return 0
	}
	return h.lk.token
}

// Context is done when the hold is lost (cause ErrLockLost) or released
// (cause ErrReleased). It carries the values of the ctx given to RLock or
// Lock, and the hold itself: RLock or Lock through it are refused at once
// (ErrUpgrade, ErrInvalid) rather than waiting for themselves.
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

// Deadline returns the local lease deadline: the hold's context ends with
// ErrLockLost then unless a renewal succeeds first.
func (h *RWHold) Deadline() time.Time {
	if h == nil || h.lk == nil {
		return time.Time{}
	}
	return h.lk.Deadline()
}

// Unlock gives the hold back and wakes the next waiter. It is idempotent
// as Permit.Release is: a second Unlock returns ErrNotHeld and sends
// nothing; on a server error the hold is given up locally all the same.
func (h *RWHold) Unlock(ctx context.Context) error {
	if h == nil || h.lk == nil {
		return ErrNotHeld
	}
	return releaseHeld(ctx, h.lk, "redfence.RWHold.Unlock")
}

// Downgrade makes the write hold a read hold in one step, keeping its
// token and its context: no writer comes between, and readers of this
// Locker waiting behind are woken (those of other Lockers by the backend's
// notification), though a waiting writer still keeps new readers out. A
// read hold returns an error matching ErrInvalid. On a server error the
// outcome is unknown: the hold stays held (renewal carries on either way)
// and Write still reports true, though the write may be a read already;
// call Downgrade again to know.
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
