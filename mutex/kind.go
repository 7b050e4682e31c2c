package mutex

import (
	"context"

	"github.com/redfence/redfence/mutex/backend"
)

// holdKind is what a Lock holds when it is not a lock of its key: a
// Semaphore's permit, or a hold of a read-write lock (RWMutex). The
// Locker's machinery for a lease (renewal in batches, local deadline, loss
// signal, Close) runs the same for each; only the backend's calls differ.
type holdKind interface {
	// family groups holds renewed by one backend call (extendHolds).
	family() holdFamily
	// queueKey is the key of the hold's queue among the Locker's local
	// queues.
	queueKey() string
	releaseHold(ctx context.Context, ls backend.Lease) (bool, error)
	extendHolds(ctx context.Context, ls []backend.Lease) ([]backend.Renewal, error)
}

type holdFamily int

const (
	familyLock holdFamily = iota
	familyPermit
	familyRW
)

// familyOf is lk's family: familyLock for a lock.
func familyOf(lk *Lock) holdFamily {
	if lk.kind == nil {
		return familyLock
	}
	return lk.kind.family()
}

// extendOf is the backend's call that renews holds of lk's family.
func (l *Locker) extendOf(lk *Lock) func(context.Context, []backend.Lease) ([]backend.Renewal, error) {
	if lk.kind == nil {
		return l.drv.b.Extend
	}
	return lk.kind.extendHolds
}

// releaseHeld gives lk's hold back and wakes the next waiter: Permit.Release
// and RWHold.Release. A second call, or one after the hold was lost, returns
// ErrNotHeld and sends nothing. On a server error the hold is given up
// locally all the same (renewal stops, so its lease runs out within one
// TTL), one more release is tried in the background, and the error is
// returned.
func releaseHeld(ctx context.Context, lk *Lock, spanName string) error {
	if err := lk.usable(ctx); err != nil {
		return err
	}
	l, k := lk.l, lk.kind
	if !l.now().Before(lk.Deadline()) {
		lk.lose("lease deadline passed")
		return ErrNotHeld
	}
	ctx, span := l.tel.startSpan(ctx, spanName, lk.key, lk.token)
	ok, err := k.releaseHold(ctx, lease(lk))
	switch {
	case err != nil:
		if lk.finish(ErrReleased, "") {
			l.afterward(func(ctx context.Context) {
				if ok, _ := k.releaseHold(ctx, lease(lk)); ok {
					l.wakeAfterRelease(k.queueKey())
				}
			})
		}
		endSpan(span, "error", err)
		return unavailable(err)
	case !ok:
		lk.lose("release found the hold gone")
		endSpan(span, "not_held", ErrNotHeld)
		return ErrNotHeld
	}
	lk.finish(ErrReleased, "")
	l.wakeAfterRelease(k.queueKey())
	endSpan(span, "released", nil)
	return nil
}

// wakeAfterRelease wakes the head of the local queue qkey after a release of
// this process, unless the queue listens for the backend's notifications:
// then the release's own notification wakes it, and a direct wake-up too
// would cost a second attempt per release.
func (l *Locker) wakeAfterRelease(qkey string) {
	l.mu.Lock()
	q := l.queues[qkey]
	listening := q != nil && q.unwatch != nil
	l.mu.Unlock()
	if !listening {
		l.wakeLocal(qkey)
	}
}
