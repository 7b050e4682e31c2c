package runnertest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/runner"
)

// replica is one runner with its own client and Locker, as a process.
type replica struct {
	r    *runner.Runner
	stop func() error // cancels Run and returns what it returned
}

func startReplica(t *testing.T, c *redis.Client, add func(r *runner.Runner), opts ...runner.Option) *replica {
	t.Helper()
	l, err := redistest.NewLocker(c)
	require.NoError(t, err)
	r := newRunner(t, l, opts...)
	add(r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	var once sync.Once
	stop := func() error {
		once.Do(func() {
			cancel()
			err = <-done
			_ = l.Close()
			_ = c.Close()
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return &replica{r: r, stop: stop}
}

// ledger is what the jobs report: every run's slot and token, and whether
// two runs were ever in progress at once.
type ledger struct {
	mu       sync.Mutex
	slots    map[time.Time]int
	tokens   []int64
	inFlight atomic.Int64
	overlaps atomic.Int64
	runs     atomic.Int64
}

func newLedger() *ledger { return &ledger{slots: map[time.Time]int{}} }

func (lg *ledger) job(d time.Duration) runner.Job {
	return func(ctx context.Context, run runner.Run) error {
		if lg.inFlight.Add(1) > 1 {
			lg.overlaps.Add(1)
		}
		defer lg.inFlight.Add(-1)
		lg.runs.Add(1)
		lg.mu.Lock()
		lg.slots[run.Slot]++
		lg.tokens = append(lg.tokens, run.Token)
		lg.mu.Unlock()
		if d > 0 {
			select {
			case <-time.After(d): // the job's work
			case <-ctx.Done():
			}
		}
		return nil
	}
}

func (lg *ledger) check(t *testing.T) {
	t.Helper()
	lg.mu.Lock()
	defer lg.mu.Unlock()
	for slot, n := range lg.slots {
		assert.Equal(t, 1, n, "slot %v ran %d times", slot, n)
	}
	assert.Zero(t, lg.overlaps.Load(), "two runs of the job overlapped")
	for i := 1; i < len(lg.tokens); i++ {
		assert.Greater(t, lg.tokens[i], lg.tokens[i-1], "tokens increase run after run")
	}
}

func TestThreeReplicasEachSlotOnce(t *testing.T) {
	_, srv := redistest.Redis(t)
	lg := newLedger()
	var reps []*replica
	for i := range 3 {
		reps = append(reps, startReplica(t, srv.Client(), func(r *runner.Runner) {
			require.NoError(t, r.Add("tick", 100*time.Millisecond, lg.job(0)))
		}, runner.WithReplicaID(fmt.Sprint("r", i))))
	}
	late := testutil.MeasureLateness(t)
	start := time.Now()
	time.Sleep(3 * time.Second) // the test's duration: 30 slots of 100 ms
	for _, rp := range reps {
		require.NoError(t, rp.stop())
	}
	lg.check(t)
	assertRunsPerSlot(t, lg.runs.Load(), time.Since(start), 100*time.Millisecond, late)
}

// assertRunsPerSlot: about one run per slot of every over window: never
// more than the slots it spans, and no fewer than those a load as late as
// the one measured could have cost.
func assertRunsPerSlot(t *testing.T, runs int64, window, every time.Duration, late *testutil.Lateness) {
	t.Helper()
	late.Stop()
	slots := int64(window / every)
	lost := int64(late.Bound(0) / every)
	t.Logf("%d runs in %v (%d slots), timers up to %v late", runs, window, slots, late.Worst())
	assert.LessOrEqual(t, runs, slots+2, "more runs than slots")
	assert.GreaterOrEqual(t, runs, slots-2-lost, "slots without a run")
}

func TestLongJobNeverOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name   string
		missed runner.Missed
		min    int64 // runs expected at least, over 2 s of 250 ms runs
	}{
		{"skip", runner.Skip, 4},
		{"run once", runner.RunOnce, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := redistest.Redis(t)
			lg := newLedger()
			var reps []*replica
			for range 3 {
				reps = append(reps, startReplica(t, srv.Client(), func(r *runner.Runner) {
					require.NoError(t, r.Add("long", 100*time.Millisecond, lg.job(250*time.Millisecond), runner.WithMissed(tc.missed)))
				}))
			}
			late := testutil.MeasureLateness(t)
			time.Sleep(2 * time.Second) // the test's duration
			for _, rp := range reps {
				require.NoError(t, rp.stop())
			}
			late.Stop()
			lg.check(t)
			// Each run is 250 ms; a load as late as the one measured
			// costs runs.
			lost := int64(late.Bound(0) / (250 * time.Millisecond))
			t.Logf("%d runs, timers up to %v late", lg.runs.Load(), late.Worst())
			assert.GreaterOrEqual(t, lg.runs.Load(), tc.min-lost)
		})
	}
}

// TestSkewedClocks: replicas whose clocks differ by 40 ms never run a slot
// twice, and still run about every slot.
func TestSkewedClocks(t *testing.T) {
	_, srv := redistest.Redis(t)
	lg := newLedger()
	var reps []*replica
	for i := range 3 {
		skew := time.Duration(i) * 40 * time.Millisecond
		reps = append(reps, startReplica(t, srv.Client(), func(r *runner.Runner) {
			require.NoError(t, r.Add("skewed", 100*time.Millisecond, lg.job(0)))
		}, runner.WithClock(func() time.Time { return time.Now().Add(skew) })))
	}
	late := testutil.MeasureLateness(t)
	start := time.Now()
	time.Sleep(2 * time.Second) // the test's duration: 20 slots
	for _, rp := range reps {
		require.NoError(t, rp.stop())
	}
	lg.check(t)
	assertRunsPerSlot(t, lg.runs.Load(), time.Since(start), 100*time.Millisecond, late)
}

// TestDeadReplicaHandsOver: the replica running the job is cut off from
// Redis mid-run without releasing. Its job's ctx ends with ErrLockLost; once
// the lease is over another replica runs a later slot, never before.
func TestDeadReplicaHandsOver(t *testing.T) {
	_, srv := redistest.Redis(t)
	proxy := testutil.Proxy(t, srv.Addr())
	const ttl = 500 * time.Millisecond
	late := testutil.MeasureLateness(t)

	aStarted := make(chan runner.Run, 1)
	var aLost atomic.Int64 // unix nanos when A's run saw its ctx end
	aCause := make(chan error, 1)
	jobA := func(ctx context.Context, run runner.Run) error {
		aStarted <- run
		<-ctx.Done()
		aLost.Store(time.Now().UnixNano())
		aCause <- context.Cause(ctx)
		return ctx.Err()
	}
	ca := redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true})
	startReplica(t, ca, func(r *runner.Runner) {
		require.NoError(t, r.Add("handover", 100*time.Millisecond, jobA, runner.WithTTL(ttl)))
	}, runner.WithReplicaID("A"))
	runA := <-aStarted

	proxy.BlackHole() // A freezes as far as Redis is concerned
	bRuns := make(chan runner.Run, 100)
	var bStart atomic.Int64
	jobB := func(ctx context.Context, run runner.Run) error {
		bStart.CompareAndSwap(0, time.Now().UnixNano())
		select {
		case bRuns <- run:
		default:
		}
		return nil
	}
	startReplica(t, srv.Client(), func(r *runner.Runner) {
		require.NoError(t, r.Add("handover", 100*time.Millisecond, jobB, runner.WithTTL(ttl)))
	}, runner.WithReplicaID("B"))

	require.ErrorIs(t, <-aCause, mutex.ErrLockLost, "A's run learns it lost the lock")
	var runB runner.Run
	select {
	case runB = <-bRuns:
	case <-time.After(5 * time.Second):
		t.Fatal("B never ran the job after A's lease ran out")
	}
	assert.True(t, runB.Slot.After(runA.Slot), "B runs a later slot")
	assert.Greater(t, runB.Token, runA.Token)
	// A's lease ends at its local deadline, a little before Redis can free
	// the key for B; A's goroutine sees its ctx end as late as this host
	// wakes goroutines, which may be after B started.
	assert.GreaterOrEqual(t, bStart.Load(), aLost.Load()-int64(late.Bound(0)), "B starts only after A's lease ended")
	proxy.Heal()
}

// TestShutdownWaitsForRuns: Run returns after its ctx ends and the run in
// progress has finished; past the shutdown timeout the run is cancelled.
func TestShutdownWaitsForRuns(t *testing.T) {
	_, srv := redistest.Redis(t)
	t.Run("graceful", func(t *testing.T) {
		started, finish := make(chan struct{}, 1), make(chan struct{})
		var jobCtxErr atomic.Value
		rp := startReplica(t, srv.Client(), func(r *runner.Runner) {
			require.NoError(t, r.Add("graceful", 50*time.Millisecond, func(ctx context.Context, run runner.Run) error {
				select {
				case started <- struct{}{}:
				default:
				}
				<-finish
				jobCtxErr.Store(fmt.Sprint(ctx.Err()))
				return nil
			}))
		})
		<-started
		stopped := make(chan error, 1)
		go func() { stopped <- rp.stop() }()
		select {
		case <-stopped:
			t.Fatal("Run returned while a run was in progress")
		case <-time.After(100 * time.Millisecond): // Run must still be waiting
		}
		close(finish)
		require.NoError(t, <-stopped)
		assert.Equal(t, "<nil>", jobCtxErr.Load(), "a graceful shutdown does not cancel the run")
	})
	t.Run("timeout", func(t *testing.T) {
		started := make(chan struct{}, 1)
		cause := make(chan error, 1)
		rp := startReplica(t, srv.Client(), func(r *runner.Runner) {
			require.NoError(t, r.Add("stubborn", 50*time.Millisecond, func(ctx context.Context, run runner.Run) error {
				select {
				case started <- struct{}{}:
				default:
				}
				<-ctx.Done()
				cause <- context.Cause(ctx)
				return nil
			}))
		}, runner.WithShutdownTimeout(100*time.Millisecond))
		<-started
		err := rp.stop()
		require.Error(t, err)
		assert.ErrorIs(t, <-cause, runner.ErrShutdown)
	})
}

func TestLastAndErrors(t *testing.T) {
	_, srv := redistest.Redis(t)
	var calls atomic.Int64
	hookErrs := make(chan error, 10)
	done := make(chan struct{})
	rp := startReplica(t, srv.Client(), func(r *runner.Runner) {
		require.NoError(t, r.Add("flaky", 50*time.Millisecond, func(ctx context.Context, run runner.Run) error {
			switch calls.Add(1) {
			case 1:
				return errors.New("first attempt fails")
			case 2:
				assert.Equal(t, 2, run.Attempt, "retried within the slot")
				panic("second attempt panics")
			default:
				select {
				case <-done:
				default:
					close(done)
				}
				return nil
			}
		}, runner.WithRetries(1)))
	}, runner.WithReplicaID("me"), runner.WithErrorHook(func(name string, run runner.Run, err error) {
		hookErrs <- err
	}))
	var pe *runner.PanicError
	require.ErrorAs(t, <-hookErrs, &pe, "the panic is reported as an error")
	assert.Equal(t, "second attempt panics", pe.Value)
	<-done
	require.Eventually(t, func() bool {
		lr, err := rp.r.Last(context.Background(), "flaky")
		return err == nil && lr.Outcome == "ok"
	}, 5*time.Second, 10*time.Millisecond)
	lr, err := rp.r.Last(context.Background(), "flaky")
	require.NoError(t, err)
	assert.Equal(t, "me", lr.Replica)
	assert.NotZero(t, lr.Token)
	assert.False(t, lr.Slot.IsZero())
	_, err = rp.r.Last(context.Background(), "never-added")
	assert.ErrorIs(t, err, runner.ErrNoRun)
	require.NoError(t, rp.stop())
}
