package chaoskit

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/leadercheck"
	"github.com/redfence/redfence/mutex"
)

// electionWork is the state of the election workload.
type electionWork struct {
	tr        *leadercheck.Tracker
	terms     atomic.Int64 // terms begun
	campaigns atomic.Int64 // Campaign or Run calls that failed (not by the run's end)

	mu     sync.Mutex // guards lossy and grants
	lossy  []window
	grants map[int64]time.Time // by term: when its lock was granted, about
}

// NewElection is a run of the election workload over reg: each client
// campaigns on one election over its Locker (half with Campaign and
// Release, half with Run), and as leader makes fenced read-modify-writes of
// reg with its term until a random end or its term ends. Faults named in
// LossyFaults lose the lock's state in the store (a restart empty): two
// leaders at once are expected only across one of them. Check then judges
// the terms and the writes.
func NewElection(t *testing.T, reg Register, cfg Config) *World {
	w := New(t, reg, cfg)
	w.elect = &electionWork{tr: leadercheck.NewTracker(), grants: map[int64]time.Time{}}
	return w
}

// The election's timing from the run's TTL: the lease, a renew deadline
// inside the lease less its drift margin, a retry period of a few tries
// within it (client-go's rules, which election.New checks).
func (w *World) electionOptions() []election.Option {
	lease := w.cfg.TTL
	return []election.Option{election.WithTTL(lease), election.WithRenewDeadline(lease * 2 / 3), election.WithRetryPeriod(lease / 6)}
}

// electionClient is one candidate of the election workload.
func (w *World) electionClient(ctx context.Context, id int, l *mutex.Locker) {
	e, err := election.New(l, "chaos", w.electionOptions()...)
	if err != nil {
		w.t.Errorf("client %d: election: %v", id, err)
		return
	}
	who := fmt.Sprintf("client%d", id)
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		if id%2 == 0 {
			tm, err := e.Campaign(ctx, who)
			if err != nil {
				w.campaignFailed(ctx)
				continue
			}
			w.lead(ctx, id, l, tm, rng)
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Release)
			_ = tm.Release(rctx) // after a loss there is nothing to give up
			cancel()
			continue
		}
		err := e.Run(ctx, who, func(_ context.Context, tm *election.Term) error {
			w.lead(ctx, id, l, tm, rng)
			return nil
		})
		if err != nil {
			w.campaignFailed(ctx)
		}
	}
}

func (w *World) campaignFailed(ctx context.Context) {
	if ctx.Err() == nil {
		w.elect.campaigns.Add(1)
		w.lockErrs.Add(1)
	}
}

// lead is one term: until a random end, the term's end or its local
// deadline, a fenced read-modify-write every few ms; a stalling turn cuts
// the client off (its renewals fail, as a paused process's would) and
// sleeps past the lease before writing with the term it had.
func (w *World) lead(ctx context.Context, id int, l *mutex.Locker, tm *election.Term, rng *rand.Rand) {
	ew, who, token := w.elect, fmt.Sprintf("client%d", id), tm.Token()
	start := time.Now()
	dl := leadercheck.LockDeadline(l, token)
	ew.tr.Start(who, token, start, dl)
	if !dl.IsZero() {
		ew.granted(token, dl.Add(-w.cfg.TTL))
	}
	ew.terms.Add(1)
	until := start.Add(time.Duration(50+rng.IntN(300)) * time.Millisecond)
	for {
		now := time.Now()
		d := leadercheck.LockDeadline(l, token)
		if tm.Context().Err() != nil || !now.Before(d) || now.After(until) || ctx.Err() != nil {
			ew.tr.Stop(who, token, now)
			return
		}
		if !d.Equal(dl) {
			dl = d
			ew.tr.Lease(who, token, dl)
		}
		if w.stalls[id].Swap(false) {
			w.stall(id)
		}
		w.electionWrite(ctx, id, who, token, now)
		wait := time.NewTimer(time.Duration(2+rng.IntN(10)) * time.Millisecond)
		select {
		case <-wait.C:
		case <-tm.Context().Done():
			wait.Stop()
		}
	}
}

// stall cuts client id off (when the setup can) and sleeps past the lease.
func (w *World) stall(id int) {
	heal := func() {}
	if id < len(w.Isolate) && w.Isolate[id] != nil {
		heal = w.Isolate[id]()
	}
	w.stalled.Add(1)
	time.Sleep(w.cfg.Stall) // the stall itself, not a synchronisation
	heal()
}

// electionWrite is one fenced read-modify-write with the term, decided at
// decided; it finishes even if the run or the term ends meanwhile, so that
// its outcome is known.
func (w *World) electionWrite(ctx context.Context, id int, who string, token int64, decided time.Time) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeDeadline)
	call := time.Since(w.start).Nanoseconds()
	read, err := w.reg.RMW(wctx, token)
	ret := time.Since(w.start).Nanoseconds()
	cancel()
	stale := errors.Is(err, fenced.ErrStaleToken)
	switch {
	case stale:
		w.stale.Add(1)
	case err != nil:
		w.t.Errorf("client %d: fenced write: %v", id, err)
		return
	default:
		w.mu.Lock()
		w.history = append(w.history, porcupine.Operation{ClientId: id, Call: call, Return: ret, Output: rmw{read}})
		w.mu.Unlock()
	}
	w.elect.tr.Write(leadercheck.Write{Who: who, Term: token, Decided: decided, Accepted: !stale})
}

// window is when a lossy fault was being applied or healed.
type window struct{ from, to time.Time }

// lost records that a fault that loses the lock's state in the store
// (named in LossyFaults) was being applied or healed from from to to.
func (ew *electionWork) lost(from, to time.Time) {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	ew.lossy = append(ew.lossy, window{from, to})
}

// granted records when term's lock was granted, about: its first local
// deadline less the lease (Campaign returns later, after the journal).
func (ew *electionWork) granted(term int64, at time.Time) {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	ew.grants[term] = at
}

// explained reports whether o spans a lossy fault: one being applied or
// healed between the grant of the first leader's lock and the second
// leader's start. It returns the lossy windows near o for the message
// when not.
func (ew *electionWork) explained(o leadercheck.Overlap) (bool, []window) {
	ew.mu.Lock()
	defer ew.mu.Unlock()
	from := ew.grants[o.A.Term]
	if from.IsZero() {
		from = o.A.Start
	}
	var near []window
	for _, w := range ew.lossy {
		if !w.to.Before(from) && !w.from.After(o.B.Start) {
			return true, nil
		}
		if w.to.After(from.Add(-2*time.Second)) && w.from.Before(o.B.Start.Add(2*time.Second)) {
			near = append(near, w)
		}
	}
	return false, near
}

func (w window) String() string {
	return w.from.Format("15:04:05.000000") + ".." + w.to.Format("15:04:05.000000")
}
