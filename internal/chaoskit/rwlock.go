package chaoskit

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
)

// RWWorld is a run of the read-write lock workload: each client
// takes holds of one mutex.RWMutex over its own Locker, mostly reads (the
// register's value, recorded with its hold's token), sometimes writes (a
// fenced read-modify-write with the write's token) and sometimes
// downgrades after writing and reads on. It is a World (set Lockers,
// Faults, LossyFaults on it) with its own Run and Check; it lives apart
// from World's fields so that other workloads can grow beside it.
type RWWorld struct {
	*World
	rw rwWork
}

// rwWork is what the read-write workload observed.
type rwWork struct {
	mu     sync.Mutex // guards the slices
	spans  []rwSpan
	reads  []rwRead
	writes []rwWrite // the accepted ones
	lossy  []window

	downgrades atomic.Int64 // write holds made read holds
	tries      atomic.Int64 // TryLock and TryRLock refused
}

// rwSpan is one belief of holding: a read or the write, from the
// acquiring call's return (Start) to the earliest of the client letting go
// (Unlock or Downgrade called: Stopped), the hold's context ending and the
// last local lease deadline it had. Call is when the acquiring call began
// (the grant lies between Call and Start).
type rwSpan struct {
	Who              int
	Write            bool
	Stopped          bool
	Token            int64
	Call, Start, End time.Time
}

// rwRead is one read of the register under a read hold: its value, the
// hold's token, and whether the hold was live (context not ended, local
// deadline ahead) when the read returned, so throughout it.
type rwRead struct {
	Who   int
	Token int64
	Seen  int64
	Call  time.Time // the hold's acquiring call
	At    time.Time // the read's return
	Live  bool
}

// rwWrite is one accepted write: its token, the value it left, whether its
// hold was live when the write returned (committed inside the hold), and
// when its hold's acquiring call began.
type rwWrite struct {
	Token int64
	After int64
	Call  time.Time
	Live  bool
}

// NewRW is a run of the read-write lock workload over reg. Faults named in
// LossyFaults lose the holds in the store (a restart empty): overlaps and
// stale reads are excused only across one of them.
func NewRW(t *testing.T, reg Register, cfg Config) *RWWorld {
	return &RWWorld{World: New(t, reg, cfg)}
}

// Run is World.Run for the read-write clients.
func (w *RWWorld) Run(bounded time.Duration) {
	d := bounded
	if w.cfg.Long > 0 {
		d = w.cfg.Long
	}
	w.recordLossy()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for i, l := range w.Lockers {
		wg.Go(func() { w.rwClient(ctx, i, l) })
	}
	wg.Go(func() { w.inject(ctx, uint64(time.Now().UnixNano())) })
	w.wait(ctx, &wg)
}

// recordLossy wraps the LossyFaults so that the windows in which they were
// applied or healed are recorded, as World.lossy does for the election.
func (w *RWWorld) recordLossy() {
	for i, f := range w.Faults {
		if !slices.Contains(w.LossyFaults, f.Name) {
			continue
		}
		apply := f.Apply
		w.Faults[i].Apply = func(rng *rand.Rand) func() {
			from := time.Now()
			heal := apply(rng)
			w.rw.lost(from, time.Now())
			return func() {
				from := time.Now()
				heal()
				w.rw.lost(from, time.Now())
			}
		}
	}
}

func (rw *rwWork) lost(from, to time.Time) {
	rw.mu.Lock()
	defer rw.mu.Unlock()
	rw.lossy = append(rw.lossy, window{from, to})
}

// rwClient is one client: 7 turns in 10 a read, 2 a write, 1 a write and
// a downgrade; 1 acquisition in 8 a Try. A stalling turn is a write: it
// takes the hold without renewal and sleeps past the lease before writing,
// so that the fence meets late writers (a late read changes nothing).
func (w *RWWorld) rwClient(ctx context.Context, id int, l *mutex.Locker) {
	renewed, err := mutex.NewRWMutex(l, "rw", mutex.WithTTL(w.cfg.TTL))
	if err != nil {
		w.t.Errorf("client %d: RWMutex: %v", id, err)
		return
	}
	unrenewed, err := mutex.NewRWMutex(l, "rw", mutex.WithTTL(w.cfg.TTL), mutex.WithAutoRenew(false))
	if err != nil {
		w.t.Errorf("client %d: RWMutex: %v", id, err)
		return
	}
	rng := rand.New(rand.NewPCG(uint64(id), uint64(time.Now().UnixNano())))
	for ctx.Err() == nil {
		stall := w.stalls[id].Swap(false)
		m := renewed
		if stall {
			m = unrenewed
		}
		n := rng.IntN(10)
		if stall {
			n = 7 + rng.IntN(3)
		}
		h, call := w.take(ctx, m, n >= 7, rng.IntN(8) == 0)
		if h == nil {
			continue
		}
		if stall {
			w.stalled.Add(1)
			time.Sleep(w.cfg.Stall) // the stall itself, not a synchronisation
		}
		w.use(ctx, id, h, call, n == 9, rng)
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Release)
		_ = h.Release(uctx) // ErrNotHeld after a loss is expected here
		cancel()
	}
}

// take acquires a hold of m (the write when write; one attempt when try),
// returning nil when it was not granted, and when the call began.
func (w *RWWorld) take(ctx context.Context, m *mutex.RWMutex, write, try bool) (*mutex.RWHold, time.Time) {
	call := time.Now()
	lctx, cancel := context.WithTimeout(ctx, lockDeadline)
	defer cancel()
	var h *mutex.RWHold
	var err error
	switch {
	case write && try:
		h, err = m.TryLock(lctx)
	case write:
		h, err = m.Lock(lctx)
	case try:
		h, err = m.TryRLock(lctx)
	default:
		h, err = m.RLock(lctx)
	}
	switch {
	case err == nil:
		return h, call
	case try && errors.Is(err, mutex.ErrNotAcquired):
		w.rw.tries.Add(1)
	case ctx.Err() == nil:
		w.lockErrs.Add(1)
	}
	return nil, call
}

// use is one hold's turn: a write (then, when downgrade, a Downgrade and
// reads) or a few reads, each belief recorded as a span.
func (w *RWWorld) use(ctx context.Context, id int, h *mutex.RWHold, call time.Time, downgrade bool, rng *rand.Rand) {
	var ended atomic.Pointer[time.Time]
	stop := context.AfterFunc(h.Context(), func() { now := time.Now(); ended.Store(&now) })
	defer stop()
	start := time.Now()
	if h.Write() {
		w.write(ctx, id, h, call)
		dg := time.Now()
		w.span(id, h, true, call, start, dg, &ended)
		if !downgrade {
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.cfg.Release)
		err := h.Downgrade(dctx)
		cancel()
		if err != nil {
			return // lost, or unknown: the hold is let go as it is
		}
		w.rw.downgrades.Add(1)
		call, start = dg, time.Now()
	}
	// A reader's work between reads, to meet writers; one hold in eight
	// lasts tens of ms, so that faults land inside read holds too.
	work := 3
	if rng.IntN(8) == 0 {
		work = 40
	}
	for range 1 + rng.IntN(3) {
		w.read(ctx, id, h, call)
		time.Sleep(time.Duration(rng.IntN(work)) * time.Millisecond)
	}
	w.span(id, h, false, call, start, time.Now(), &ended)
}

// span records a belief that began at start and that the client gave up
// at stop: it ends earlier if the hold's context ended or its last local
// deadline passed before.
func (w *RWWorld) span(id int, h *mutex.RWHold, write bool, call, start, stop time.Time, ended *atomic.Pointer[time.Time]) {
	end, stopped := stop, true
	if d := h.Deadline(); d.Before(end) {
		end, stopped = d, false
	}
	if e := ended.Load(); e != nil && e.Before(end) {
		end, stopped = *e, false
	}
	w.rw.mu.Lock()
	defer w.rw.mu.Unlock()
	w.rw.spans = append(w.rw.spans, rwSpan{Who: id, Write: write, Stopped: stopped,
		Token: h.Token(), Call: call, Start: start, End: end})
}

// live reports whether h is held as far as its client can tell.
func live(h *mutex.RWHold) bool {
	return h.Context().Err() == nil && time.Now().Before(h.Deadline())
}

// read reads the register under h; it finishes even if the run ends.
func (w *RWWorld) read(ctx context.Context, id int, h *mutex.RWHold, call time.Time) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeDeadline)
	v, err := w.reg.Value(rctx)
	cancel()
	at, ok := time.Now(), live(h)
	if err != nil {
		w.t.Errorf("client %d: read: %v", id, err)
		return
	}
	w.rw.mu.Lock()
	defer w.rw.mu.Unlock()
	w.rw.reads = append(w.rw.reads, rwRead{Who: id, Token: h.Token(), Seen: v, Call: call, At: at, Live: ok})
}

// write is one fenced read-modify-write with h's token; it finishes even
// if the run ends, so that its outcome is known.
func (w *RWWorld) write(ctx context.Context, id int, h *mutex.RWHold, call time.Time) {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), writeDeadline)
	begin := time.Since(w.start).Nanoseconds()
	read, err := w.reg.RMW(wctx, h.Token())
	ret := time.Since(w.start).Nanoseconds()
	cancel()
	ok := live(h)
	switch {
	case errors.Is(err, fenced.ErrStaleToken):
		w.stale.Add(1)
		return
	case err != nil:
		w.t.Errorf("client %d: fenced write: %v", id, err)
		return
	}
	w.mu.Lock()
	w.history = append(w.history, porcupine.Operation{ClientId: id, Call: begin, Return: ret, Output: rmw{read}})
	w.mu.Unlock()
	w.rw.mu.Lock()
	defer w.rw.mu.Unlock()
	w.rw.writes = append(w.rw.writes, rwWrite{Token: h.Token(), After: read + 1, Call: call, Live: ok})
}
