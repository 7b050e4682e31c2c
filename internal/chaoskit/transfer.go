package chaoskit

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
)

// transferIn is a transfer's input: amount from account from to account to.
type transferIn struct {
	from, to int
	amount   int64
}

// ledgerWork is the state of the multi-key workload.
type ledgerWork struct {
	ledger  Ledger
	holders [Accounts]atomic.Int32 // per account: clients that believe they hold its key now
	late    atomic.Int64           // the most a LockAll returned after its deadline, in ns
}

// NewTransfers is a run of the multi-key workload over lg: each client
// transfers between two random accounts, given to LockAll in random order,
// then fenced.Guard.DoAll on both. Check then judges the ledger.
func NewTransfers(t *testing.T, lg Ledger, cfg Config) *World {
	w := New(t, nil, cfg)
	w.work = &ledgerWork{ledger: lg}
	return w
}

// lockDeadline bounds every Lock and LockAll of the clients.
const lockDeadline = 2 * time.Second

// writeDeadline bounds every fenced transfer: PostgreSQL is not faulted,
// and a transfer that waits this long is stuck.
const writeDeadline = 10 * time.Second

// transferClient is one worker of the multi-key workload.
func (w *World) transferClient(ctx context.Context, id int, l *mutex.Locker) {
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		p := rng.Perm(Accounts)
		w.transfer(ctx, id, l, transferIn{from: p[0], to: p[1], amount: 1 + rng.Int64N(100)})
	}
}

// transfer is one turn: LockAll both accounts' keys (from's first: the
// order is random, as the accounts are), maybe stall past the lease, one
// fenced transaction on both, Unlock.
func (w *World) transfer(ctx context.Context, id int, l *mutex.Locker, in transferIn) {
	lw := w.work
	stall := w.stalls[id].Swap(false)
	keys := []string{AccountKey(in.from), AccountKey(in.to)}
	lctx, cancel := context.WithTimeout(ctx, lockDeadline)
	ls, err := l.LockAll(lctx, keys, mutex.WithTTL(w.cfg.TTL), mutex.WithAutoRenew(!stall))
	if d, ok := lctx.Deadline(); ok && err != nil {
		storeMax(&lw.late, int64(time.Since(d)))
	}
	cancel()
	if err != nil {
		w.lockErrs.Add(1)
		return
	}
	overlap := lw.holders[in.from].Add(1) > 1
	overlap = lw.holders[in.to].Add(1) > 1 || overlap
	if overlap {
		w.overlaps.Add(1)
	}
	if stall {
		// The pause ignores ls.Context(), as a stopped process would.
		w.stalled.Add(1)
		time.Sleep(w.cfg.Stall)
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeDeadline)
	call := time.Since(w.start).Nanoseconds()
	read, err := lw.ledger.Transfer(wctx, in.from, in.to, in.amount, ls.TokenOf(keys[0]), ls.TokenOf(keys[1]))
	ret := time.Since(w.start).Nanoseconds()
	cancel()
	lw.holders[in.from].Add(-1)
	lw.holders[in.to].Add(-1)
	switch {
	case errors.Is(err, fenced.ErrStaleToken):
		w.stale.Add(1) // rejected before fn: no effect on the ledger
	case err != nil:
		w.t.Errorf("client %d: fenced transfer: %v", id, err)
	default:
		w.mu.Lock()
		w.history = append(w.history, porcupine.Operation{ClientId: id, Input: in, Call: call, Return: ret, Output: read})
		w.mu.Unlock()
	}
	uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Release)
	_ = ls.Release(uctx) // ErrNotHeld after a loss is expected here
	cancel()
}

// storeMax raises a to v if v is larger.
func storeMax(a *atomic.Int64, v int64) {
	for old := a.Load(); v > old && !a.CompareAndSwap(old, v); old = a.Load() {
	}
}
