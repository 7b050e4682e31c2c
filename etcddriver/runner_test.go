package etcddriver_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/runner"
)

// A runner over an etcd Locker claims its slots in etcd. Each replica has
// a client, a Driver and a Locker of its own, as a process would.

// runnerOn starts a Runner on c with the jobs add adds, until stop (or t's
// clean-up); stop returns what Run returned.
func runnerOn(t *testing.T, c *etcdtest.Cluster, add func(r *runner.Runner), opts ...runner.Option) (r *runner.Runner, stop func() error) {
	t.Helper()
	l, _, _ := locker(t, c)
	r, err := runner.New(l, opts...)
	require.NoError(t, err)
	add(r)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	stop = sync.OnceValue(func() error { cancel(); return <-done })
	t.Cleanup(func() { _ = stop() })
	return r, stop
}

// skewed is a replica clock off by d.
func skewed(d time.Duration) runner.Option {
	return runner.WithClock(func() time.Time { return time.Now().Add(d) })
}

// runLog is what a job's runs report, in the order they started: the job's
// lock orders them.
type runLog struct {
	mu       sync.Mutex
	runs     []loggedRun
	inFlight atomic.Int64
	overlaps atomic.Int64
	ran      chan struct{} // a value per run, never blocking the job
}

type loggedRun struct {
	runner.Run
	at time.Time // when it started, on this host's clock
}

func newRunLog() *runLog { return &runLog{ran: make(chan struct{}, 10_000)} }

func (lg *runLog) job(ctx context.Context, run runner.Run) error {
	if lg.inFlight.Add(1) > 1 {
		lg.overlaps.Add(1)
	}
	defer lg.inFlight.Add(-1)
	lg.mu.Lock()
	lg.runs = append(lg.runs, loggedRun{run, time.Now()})
	lg.mu.Unlock()
	lg.ran <- struct{}{}
	return nil
}

// await waits for n more runs.
func (lg *runLog) await(t *testing.T, n int) {
	t.Helper()
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for i := range n {
		select {
		case <-lg.ran:
		case <-timeout.C:
			t.Fatalf("%d runs of %d within a minute", i, n)
		}
	}
}

// check asserts that each slot ran once, that tokens increased run after
// run and that no two runs overlapped, and returns the runs.
func (lg *runLog) check(t *testing.T) []loggedRun {
	t.Helper()
	lg.mu.Lock()
	runs := append([]loggedRun(nil), lg.runs...)
	lg.mu.Unlock()
	seen := map[time.Time]int{}
	for i, r := range runs {
		seen[r.Slot]++
		if i > 0 {
			assert.Greater(t, r.Token, runs[i-1].Token, "tokens increase run after run")
		}
	}
	for slot, n := range seen {
		assert.Equal(t, 1, n, "slot %v ran %d times", slot, n)
	}
	assert.Zero(t, lg.overlaps.Load(), "two runs of the job overlapped")
	return runs
}

// Three replicas whose clocks differ by up to 80 ms run each slot once,
// and about every slot.
func TestRunnerSkewedClocks(t *testing.T) {
	c := server(t)
	lg := newRunLog()
	const every = 100 * time.Millisecond
	late := testutil.MeasureLateness(t)
	start := time.Now()
	var stops []func() error
	for i, skew := range []time.Duration{-40 * time.Millisecond, 0, 40 * time.Millisecond} {
		_, stop := runnerOn(t, c, func(r *runner.Runner) {
			require.NoError(t, r.Add("skewed", every, lg.job))
		}, skewed(skew), runner.WithReplicaID(fmt.Sprint("r", i)))
		stops = append(stops, stop)
	}
	lg.await(t, 20)
	for _, stop := range stops {
		require.NoError(t, stop())
	}
	window := time.Since(start)
	late.Stop()
	runs := lg.check(t)
	slots, lost := int(window/every), int(late.Bound(0)/every)
	t.Logf("%d runs in %v (%d slots), timers up to %v late", len(runs), window, slots, late.Worst())
	// The window's slots on every clock: 80 ms of skew spreads them.
	assert.LessOrEqual(t, len(runs), int((window+80*time.Millisecond)/every)+2, "more runs than slots")
	assert.GreaterOrEqual(t, len(runs), slots-2-lost, "slots without a run")
}

// A replica whose clock runs an hour ahead claims slots the others reach
// only an hour later: from its first claim on, theirs are refused (never a
// lower slot after a higher one), so it runs every slot, early, and the job
// still runs once a slot's time.
func TestRunnerClockFarAhead(t *testing.T) {
	c := server(t)
	lg := newRunLog()
	const every = 100 * time.Millisecond
	add := func(r *runner.Runner) { require.NoError(t, r.Add("ahead", every, lg.job)) }
	start := time.Now()
	_, stopA := runnerOn(t, c, add, runner.WithReplicaID("A"))
	_, stopB := runnerOn(t, c, add, skewed(30*time.Millisecond), runner.WithReplicaID("B"))
	lg.await(t, 5)
	_, stopF := runnerOn(t, c, add, skewed(time.Hour), runner.WithReplicaID("F"))
	lg.await(t, 20)
	for _, stop := range []func() error{stopA, stopB, stopF} {
		require.NoError(t, stop())
	}
	window := time.Since(start)
	runs := lg.check(t)

	first, others := -1, 0
	for i, r := range runs {
		switch {
		case r.Replica == "F" && first < 0:
			first = i
		case r.Replica != "F" && first >= 0:
			others++ // claimed before F's first claim, run after it
		}
	}
	require.GreaterOrEqual(t, first, 0, "F ran")
	assert.LessOrEqual(t, others, 2, "A and B ran slots claimed after F's")
	// A slot's time has one run: a run each for the window's slots, and
	// a few more where the replicas start and F takes over.
	assert.LessOrEqual(t, len(runs), int(window/every)+6, "more runs than slots' times")
}

// A replica whose clock runs 1.9 s ahead, on a 2 s job, would claim its
// slot 0.1 s after the other replica's: the gap on the leader's clock
// (interval − grace: 1 s) keeps any two claims, hence any two runs, at
// least that far apart.
func TestRunnerGapOnTheLeadersClock(t *testing.T) {
	t.Parallel()
	c := server(t)
	lg := newRunLog()
	const every = 2 * time.Second
	add := func(r *runner.Runner) { require.NoError(t, r.Add("gap", every, lg.job)) }
	late := testutil.MeasureLateness(t)
	_, stopH := runnerOn(t, c, add, runner.WithReplicaID("H"))
	lg.await(t, 1)
	_, stopF := runnerOn(t, c, add, skewed(every-100*time.Millisecond), runner.WithReplicaID("F"))
	lg.await(t, 2)
	require.NoError(t, stopF())
	require.NoError(t, stopH())
	late.Stop()
	runs := lg.check(t)
	for i := 1; i < len(runs); i++ {
		// A run starts a little after its claim: a lock's round trip.
		apart := runs[i].at.Sub(runs[i-1].at)
		t.Logf("run %d (%s) %v after run %d (%s)", i, runs[i].Replica, apart, i-1, runs[i-1].Replica)
		assert.GreaterOrEqual(t, apart, time.Second-late.Bound(100*time.Millisecond), "runs closer than the gap")
	}
}

// A replica that wakes too late into a slot (past the grace: half the
// interval) skips it without claiming it, as the Redis script does: here its
// clock stands still three quarters into a slot, and the loop goes round
// without ever running the job.
func TestRunnerLateSlotSkipped(t *testing.T) {
	c := server(t)
	lg := newRunLog()
	const every = 100 * time.Millisecond
	frozen := time.UnixMilli(time.Now().UnixMilli()/100*100 + 75)
	var reads atomic.Int64
	went := make(chan struct{})
	clock := func() time.Time {
		if reads.Add(1) == 30 {
			close(went)
		}
		return frozen
	}
	_, stop := runnerOn(t, c, func(r *runner.Runner) {
		require.NoError(t, r.Add("late", every, lg.job))
	}, runner.WithClock(clock))
	<-went // the loop went round a dozen times
	require.NoError(t, stop())
	assert.Empty(t, lg.check(t), "a slot run past its grace")
}

// Last reads, from any replica, the record of the last run another one
// made.
func TestRunnerLast(t *testing.T) {
	c := server(t)
	lg := newRunLog()
	_, stopA := runnerOn(t, c, func(r *runner.Runner) {
		require.NoError(t, r.Add("recorded", 50*time.Millisecond, lg.job))
	}, runner.WithReplicaID("A"))
	reader, _ := runnerOn(t, c, func(*runner.Runner) {})
	ctx := testCtx(t)
	_, err := reader.Last(ctx, "recorded")
	lg.await(t, 1)
	require.NoError(t, stopA())
	if err == nil {
		t.Log("a run was recorded before the first read") // possible: A starts at once
	} else {
		assert.ErrorIs(t, err, runner.ErrNoRun)
	}
	runs := lg.check(t)
	last := runs[len(runs)-1]
	lr, err := reader.Last(ctx, "recorded")
	require.NoError(t, err)
	assert.Equal(t, "A", lr.Replica)
	assert.Equal(t, "ok", lr.Outcome)
	assert.Equal(t, last.Token, lr.Token)
	assert.True(t, last.Slot.Equal(lr.Slot), "slot %v, recorded %v", last.Slot, lr.Slot)
	_, err = reader.Last(ctx, "never-added")
	assert.ErrorIs(t, err, runner.ErrNoRun)
}

// The leader of a 3-member cluster dies while three replicas with skewed
// clocks run a job: claims fail during the election (reported, the loop
// goes on), and no slot runs twice, before, during or after.
func TestRunnerLeaderKilled(t *testing.T) {
	t.Parallel()
	c := etcdtest.StartCluster(t, 3)
	lg := newRunLog()
	var stops []func() error
	for i, skew := range []time.Duration{-40 * time.Millisecond, 0, 40 * time.Millisecond} {
		_, stop := runnerOn(t, c, func(r *runner.Runner) {
			require.NoError(t, r.Add("failover", 100*time.Millisecond, lg.job))
		}, skewed(skew), runner.WithReplicaID(fmt.Sprint("r", i)))
		stops = append(stops, stop)
	}
	lg.await(t, 10)
	c.KillLeader(t)
	lg.await(t, 10)
	for _, stop := range stops {
		require.NoError(t, stop())
	}
	lg.check(t)
}
