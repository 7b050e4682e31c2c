// Package chaoskit is the harness of redfence's reliability suites (the
// chaos package, and the etcd module's internal/chaos): Clients clients,
// each with its own Locker, repeatedly lock, do a fenced read-modify-write
// of a register, and unlock, while a fault loop injects the setup's faults
// at random; Check then judges what happened. A setup brings the Lockers,
// the faults and the register; the loop, the checks and the failure
// artefacts are the same for every setup. NewTransfers runs a multi-key
// workload instead (transfers between accounts of a Ledger, LockAll and
// fenced.Guard.DoAll), under the same faults, with checks of its own;
// NewElection an election workload (candidates on one election.Election,
// the leader writing the register with its term), checked by
// internal/leadercheck; NewSemaphore a semaphore workload (permits of one
// mutex.Semaphore, writes under them), checked against a model of a
// counting semaphore.
package chaoskit

import (
	"context"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/redfence/redfence/mutex"
)

// Clients is how many clients a run has: each setup gives the World one
// Locker per client.
const Clients = 4

// Config is what differs between setups and runs.
type Config struct {
	// Long is the suite's -chaos.duration: how long each setup runs under
	// faults, and what makes a run long (Check then also asserts that the
	// stalls showed); 0 is make test's bounded run.
	Long time.Duration
	// TTL is the lease every Lock asks for; default 300 ms.
	TTL time.Duration
	// Stall is how long a stalling client sleeps while it believes it
	// holds the lock: longer than the store keeps the lock without renewal.
	// Default 2×TTL.
	Stall time.Duration
	// Release bounds each Unlock; default 1 s. A release that fails leaves
	// the key to its lease (after the Locker's one retry in the background).
	Release time.Duration
}

// World is one chaos run: the clients' Lockers and the setup's faults (set
// them before Run), the register, and what was observed.
type World struct {
	Lockers []*mutex.Locker // one per client, Clients of them
	Faults  []Fault
	// Isolate, per client (optional; the election workload's stalls use
	// it), cuts the client off from the store and returns what heals it.
	Isolate []func() (heal func())
	// LossyFaults names the Faults that lose a held lock's state in the
	// store (a restart empty): the election workload tolerates two leaders
	// at once, the semaphore workload more holders than permits, only
	// across one of them.
	LossyFaults []string
	// TxClients, by client (optional, the register workload), replace
	// those clients' Lockers: each write takes the key in its own
	// transaction.
	TxClients map[int]TxRMW

	t     *testing.T
	reg   Register      // the register workload's resource
	work  *ledgerWork   // the multi-key workload (NewTransfers), or nil
	elect *electionWork // the election workload (NewElection), or nil
	sem   *semWork      // the semaphore workload (NewSemaphore), or nil
	cfg   Config

	mu      sync.Mutex // guards history and counts
	history []porcupine.Operation
	counts  map[string]int // faults injected, by name
	start   time.Time

	holders  atomic.Int32  // clients that believe they hold the lock now
	overlaps atomic.Int64  // acquisitions made while another client still believed it held the lock
	stalled  atomic.Int64  // critical sections that stalled past the lease
	stale    atomic.Int64  // writes the fence rejected
	lockErrs atomic.Int64  // Lock calls that timed out or failed
	stalls   []atomic.Bool // per client: stall in the next critical section
	unknown  atomic.Int64  // writes whose outcome was unknown (a Resolver's register), and settled
	unknownC atomic.Int64  // those of them that had committed
}

// Fault is one kind of fault a setup injects: Apply injects it and returns
// what heals it (a no-op for faults that heal themselves). Apply and heal run
// on the fault loop's goroutine, one fault at a time: report failures with
// t.Errorf, never t.Fatal.
type Fault struct {
	Name  string
	Apply func(rng *rand.Rand) (heal func())
}

// New is a run over reg.
func New(t *testing.T, reg Register, cfg Config) *World {
	if cfg.TTL <= 0 {
		cfg.TTL = 300 * time.Millisecond
	}
	if cfg.Stall <= 0 {
		cfg.Stall = 2 * cfg.TTL
	}
	if cfg.Release <= 0 {
		cfg.Release = time.Second
	}
	return &World{t: t, reg: reg, cfg: cfg, start: time.Now(),
		stalls: make([]atomic.Bool, Clients), counts: map[string]int{}}
}

// StallFault makes a random client stall in its next critical section for
// Config.Stall, without renewal, as a process paused by a long GC or a
// stopped VM would.
func (w *World) StallFault() Fault {
	return Fault{"client stall past the lease", func(rng *rand.Rand) func() {
		w.stalls[rng.IntN(Clients)].Store(true)
		return func() {}
	}}
}

// Run runs the clients and the fault loop for Config.Long, or for bounded
// when Long is 0, and returns once every client and the last fault's heal
// are done.
func (w *World) Run(bounded time.Duration) {
	d := bounded
	if w.cfg.Long > 0 {
		d = w.cfg.Long
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for i, l := range w.Lockers {
		switch {
		case w.work != nil:
			wg.Go(func() { w.transferClient(ctx, i, l) })
		case w.elect != nil:
			wg.Go(func() { w.electionClient(ctx, i, l) })
		case w.sem != nil:
			wg.Go(func() { w.semClient(ctx, i, l) })
		case w.TxClients[i] != nil:
			wg.Go(func() { w.txClient(ctx, i, w.TxClients[i]) })
		default:
			wg.Go(func() { w.client(ctx, i, l) })
		}
	}
	wg.Go(func() { w.inject(ctx, uint64(time.Now().UnixNano())) })
	w.wait(ctx, &wg)
}

// hangBound is how long after the run's end every client must have
// returned: each call it can be in has a deadline far below it (Lock,
// the write, Unlock, a stall), so a client still running then is stuck in
// a call that ignored its deadline: a deadlock.
const hangBound = 30 * time.Second

// wait waits for wg. When it has not finished hangBound after ctx ended,
// it fails the test at once, naming a file with every goroutine's stack:
// the stuck clients are left to the test's clean-up (closing the Lockers).
func (w *World) wait(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	<-ctx.Done()
	timer := time.NewTimer(hangBound)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-timer.C:
	}
	path := "(none: " // the stacks are a help, not the verdict
	if f, err := os.CreateTemp("", "redfence-chaos-hang-*.txt"); err == nil {
		_ = pprof.Lookup("goroutine").WriteTo(f, 1)
		_ = f.Close()
		path = f.Name()
	} else {
		path += err.Error() + ")"
	}
	w.t.Fatalf("clients still running %v after the run ended: a call did not return within its deadline (deadlock?); goroutines in %s", hangBound, path)
}

// inject applies a random fault every 200-600 ms, heals it after 100-900 ms.
func (w *World) inject(ctx context.Context, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 99))
	for {
		t := time.NewTimer(time.Duration(200+rng.IntN(400)) * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		f := w.Faults[rng.IntN(len(w.Faults))]
		applying := time.Now()
		heal := f.Apply(rng)
		w.lossy(f.Name, applying)
		w.mu.Lock()
		w.counts[f.Name]++
		w.mu.Unlock()
		t = time.NewTimer(time.Duration(100+rng.IntN(800)) * time.Millisecond)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		healing := time.Now()
		heal()
		w.lossy(f.Name, healing)
	}
}

// lossy tells the election or semaphore workload, if this is one, that
// the fault named name was being applied or healed from since until now,
// if it is one of LossyFaults.
func (w *World) lossy(name string, since time.Time) {
	if !slices.Contains(w.LossyFaults, name) {
		return
	}
	switch {
	case w.elect != nil:
		w.elect.lost(since, time.Now())
	case w.sem != nil:
		now := time.Now()
		w.record(Clients, since, since, semLossy{open: true})
		w.record(Clients, now, now, semLossy{})
	}
}
