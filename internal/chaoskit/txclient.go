package chaoskit

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redfence/redfence/mutex"
)

// Resolver is a Register in the faulted store itself, where a write's
// outcome can be unknown (its commit's reply lost): Outcome waits until no
// transaction can still commit the write made as op (LockOp for RMW's) and
// says whether it did, and what it read.
type Resolver interface {
	Outcome(ctx context.Context, op string) (read int64, committed bool, err error)
}

// LockOp is the op of RMW under token: a Locker's grant writes once.
func LockOp(token int64) string { return "lock:" + strconv.FormatInt(token, 10) }

// TxRMW is a client that needs no Locker: it takes the register's key in
// a transaction of its own, calls held once it holds it, increments the
// register and records the write as op, and commits. An error matching
// mutex.ErrNotAcquired says a Locker's lease held the key.
type TxRMW func(ctx context.Context, op string, held func()) (read int64, err error)

// txClient is client for a TxRMW: its stall is a pause inside the
// transaction, which holds every other client up instead of losing the
// key.
func (w *World) txClient(ctx context.Context, id int, rmw TxRMW) {
	var seq int64
	for ctx.Err() == nil {
		stall := w.stalls[id].Swap(false)
		seq++
		op := "tx:" + strconv.Itoa(id) + ":" + strconv.FormatInt(seq, 10)
		holding := false
		held := func() {
			holding = true
			w.enter(stall)
		}
		call := time.Since(w.start).Nanoseconds()
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second+w.cfg.Stall)
		read, err := rmw(tctx, op, held)
		cancel()
		if holding {
			w.holders.Add(-1)
		}
		switch {
		case err == nil:
			w.recordRMW(id, call, read)
		case errors.Is(err, mutex.ErrNotAcquired):
			w.lockErrs.Add(1)
			pace(ctx) // a Locker holds the key for its lease: no spinning
		default:
			w.lockErrs.Add(1)
			w.resolve(ctx, id, call, op)
		}
	}
}

// recordRMW adds a read-modify-write that read read, called at call, that
// returned now.
func (w *World) recordRMW(id int, call, read int64) {
	w.appendRMW(id, call, time.Since(w.start).Nanoseconds(), read)
}

// appendRMW adds a read-modify-write that read read, called at call and
// returned at ret.
func (w *World) appendRMW(id int, call, ret, read int64) {
	w.mu.Lock()
	w.history = append(w.history, porcupine.Operation{ClientId: id, Call: call, Return: ret, Output: rmw{read}})
	w.mu.Unlock()
}

// resolve settles a write whose outcome is unknown: once committed, it is
// in the history, returning when it was found (its effect lies between
// its call and then); never committed, it had no effect.
func (w *World) resolve(ctx context.Context, id int, call int64, op string) {
	res, ok := w.reg.(Resolver)
	if !ok {
		w.t.Errorf("client %d: write %s: outcome unknown, and the register cannot tell", id, op)
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), hangBound/2)
	defer cancel()
	for {
		read, committed, err := res.Outcome(rctx, op)
		switch {
		case err == nil && committed:
			w.unknown.Add(1)
			w.unknownC.Add(1)
			w.recordRMW(id, call, read)
			return
		case err == nil:
			w.unknown.Add(1)
			return
		case rctx.Err() != nil:
			w.t.Errorf("client %d: write %s: outcome still unknown: %v", id, op, err)
			return
		}
		pace(rctx) // the store is down: a restart or a pause
	}
}

// pace waits 10-30 ms, or until ctx ends.
func pace(ctx context.Context) {
	t := time.NewTimer(time.Duration(10+time.Now().UnixNano()%20) * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
