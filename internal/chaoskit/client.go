package chaoskit

import (
	"context"
	"errors"
	"time"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
)

// client is one worker: lock, maybe stall (a GC pause past the lease), a
// fenced read-modify-write, unlock.
func (w *World) client(ctx context.Context, id int, l *mutex.Locker) {
	for ctx.Err() == nil {
		// A real pause stops the whole process, renewal included; here only
		// this goroutine sleeps, so a stalling turn runs without renewal.
		stall := w.stalls[id].Swap(false)
		lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		lk, err := l.Lock(lctx, "register", mutex.WithTTL(w.cfg.TTL), mutex.WithAutoRenew(!stall))
		cancel()
		if err != nil {
			w.lockErrs.Add(1)
			continue
		}
		w.enter(stall) // the pause ignores lk.Context(), as a stopped process would
		call := time.Since(w.start).Nanoseconds()
		read, err := w.reg.RMW(context.WithoutCancel(ctx), lk.Token())
		ret := time.Since(w.start).Nanoseconds()
		w.holders.Add(-1)
		switch {
		case errors.Is(err, fenced.ErrStaleToken):
			w.stale.Add(1) // rejected before fn: no effect on the register
		case err != nil:
			if _, ok := w.reg.(Resolver); !ok {
				w.t.Errorf("client %d: fenced write: %v", id, err)
				break
			}
			w.resolve(ctx, id, call, LockOp(lk.Token())) // the register is in the faulted store
		default:
			w.appendRMW(id, call, ret, read)
		}
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Release)
		_ = lk.Release(uctx) // ErrNotHeld after a loss is expected here
		cancel()
	}
}

// enter counts a client that believes it holds the register's key (an
// overlap when another does too) and, when it is to stall, sleeps past the
// lease.
func (w *World) enter(stall bool) {
	if w.holders.Add(1) > 1 {
		w.overlaps.Add(1)
	}
	if stall {
		w.stalled.Add(1)
		time.Sleep(w.cfg.Stall)
	}
}
