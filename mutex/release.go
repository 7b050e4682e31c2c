package mutex

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// Release takes one count: an inner Release (after a re-entry) only counts
// down; the last frees the lock, wakes waiters and ends the context with
// ErrReleased. A lock lost or released returns ErrNotHeld. On a store error
// the lock is given up locally (its lease runs out within one TTL), a retry
// runs in the background, and the error is returned.
func (lk *Lock) Release(ctx context.Context) error {
	if err := lk.usable(ctx); err != nil {
		return err
	}
	lk.mu.Lock()
	if lk.count > 1 {
		lk.count--
		lk.mu.Unlock()
		return nil
	}
	// The release script does not refuse a lease that ran out on the server
	// (see release.lua); the local deadline, which ends first, does.
	expired := !lk.l.now().Before(lk.deadline)
	lk.mu.Unlock()
	if expired {
		lk.lose("lease deadline passed")
		return ErrNotHeld
	}

	l := lk.l
	ctx, span := l.tel.startSpan(ctx, "redfence.Release", lk.key, lk.token)
	// Only a waiter that can be handed the lock is reserved: none of a
	// backend without hand-off (Redlock) ever is (see enqueue). With no call
	// queued at all there is none to look for.
	if l.waiters.Load() > 0 {
		if w := l.reserveHandoff(lk.key); w != nil {
			return lk.handOff(ctx, w, span)
		}
	}
	n, err := l.release(ctx, lk)
	switch {
	case err != nil:
		if lk.finish(ErrReleased, "") {
			l.retryRelease(lk)
		}
		endSpan(span, "error", err)
		return err
	case n < 0:
		lk.lose("unlock found the lock gone")
		endSpan(span, "not_held", ErrNotHeld)
		return ErrNotHeld
	}
	lk.finish(ErrReleased, "")
	// Read after the release landed: a call queued later asks Redis after
	// it and finds the lock free; only a call queued before can need waking.
	if l.waiters.Load() > 0 {
		l.wakeLocal(lk.key)
	}
	endSpan(span, "released", nil)
	return nil
}

// handOff releases lk and takes the lock for w, the next local waiter, in
// one round trip. w was reserved and gets exactly one offer, whatever
// happens here.
func (lk *Lock) handOff(ctx context.Context, w *waiter, span trace.Span) error {
	l := lk.l
	sent := l.now()
	left, token, handle, err := l.handOffTo(ctx, lk, w.owner, w.lc.ttl)
	switch {
	case err != nil:
		w.offer <- handoff{}
		// Unknown outcome: if it landed, the waiter's owner holds the lock
		// unused and its lease runs out; release ours once more if not.
		if lk.finish(ErrReleased, "") {
			l.retryRelease(lk)
		}
		endSpan(span, "error", err)
		return err
	case left < 0:
		w.offer <- handoff{}
		lk.lose("unlock found the lock gone")
		endSpan(span, "not_held", ErrNotHeld)
		return ErrNotHeld
	case left > 0: // still held through a re-entry in Redis
		w.offer <- handoff{}
		lk.finish(ErrReleased, "")
		endSpan(span, "released", nil)
		return nil
	}
	lk.finish(ErrReleased, "")
	w.offer <- handoff{ok: true, token: token, handle: handle, sent: sent}
	endSpan(span, "handed_off", nil)
	return nil
}
