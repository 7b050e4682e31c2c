package electiontest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/redisfence"
)

// Three candidates run fn in turn; one of them is cut off from Redis now
// and then, so that its term ends by the renew deadline while its fn
// honours the context. No two fns ever overlap, and the terms fns see
// strictly increase.
func TestRunNeverOverlaps(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx := testCtx(t)
	pc, proxy := proxied(t, srv)
	var (
		active, overlaps atomic.Int32
		mu               sync.Mutex
		terms            []int64
	)
	cutLeads := make(chan struct{}, 1)
	fn := func(ctx context.Context, term *election.Term) error {
		if active.Add(1) > 1 {
			overlaps.Add(1)
		}
		mu.Lock()
		terms = append(terms, term.Token())
		mu.Unlock()
		work := time.After(20 * time.Millisecond)
		if term.Value() == "c" { // the one cut off works until its term ends
			work = nil
			select {
			case cutLeads <- struct{}{}:
			default:
			}
		}
		select {
		case <-ctx.Done():
		case <-work:
		}
		active.Add(-1)
		return nil
	}
	run, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, cl := range []redis.UniversalClient{c, c, pc} {
		e := candidate(t, cl, "overlap")
		wg.Go(func() {
			for run.Err() == nil {
				_ = e.Run(run, string(rune('a'+i)), fn)
			}
		})
	}
	t.Cleanup(func() { stop(); wg.Wait() }) // before the Lockers close, however the test ends
	for range 5 {
		select { // c leads: cut it off; its term ends by the renew deadline
		case <-cutLeads:
		case <-time.After(30 * time.Second):
			t.Fatal("c did not lead again")
		}
		proxy.BlackHole()
		waitTerms(t, &mu, &terms, 10)
		require.Zero(t, overlaps.Load())
		proxy.Heal()
	}
	stop()
	wg.Wait()
	assert.Zero(t, overlaps.Load())
	mu.Lock()
	defer mu.Unlock()
	require.Greater(t, len(terms), 50)
	for i := 1; i < len(terms); i++ {
		require.Greater(t, terms[i], terms[i-1])
	}
}

// waitTerms waits until n more terms ran.
func waitTerms(t *testing.T, mu *sync.Mutex, terms *[]int64, n int) {
	t.Helper()
	mu.Lock()
	want := len(*terms) + n
	mu.Unlock()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(*terms) >= want
	}, 30*time.Second, time.Millisecond)
}

// An fn that ignores its context outlives its term: another candidate
// leads once the lease ran out, and the late writes of the first are
// refused by the fence its term feeds.
func TestRunIgnoringContextIsFenced(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	a, b := candidate(t, c, "ignore"), candidate(t, c, "ignore")
	fence, err := redisfence.New(c)
	require.NoError(t, err)
	write := func(who string, term int64) error {
		return fence.Do(ctx, "ignored", term, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			pipe.Set(ctx, "writer:"+redisfence.Tag("ignored"), who, 0)
			return nil
		})
	}
	leading, wake, wrote := make(chan int64), make(chan struct{}), make(chan error, 1)
	runA, stopA := context.WithCancel(ctx)
	ranA := make(chan error)
	go func() {
		ranA <- a.Run(runA, "a", func(tctx context.Context, term *election.Term) error {
			leading <- term.Token()
			require.NoError(t, write("a", term.Token()))
			<-wake // ignores tctx
			wrote <- write("a", term.Token())
			return nil
		})
	}()
	termA := <-leading
	stopA()
	stopped := time.Now()
	termB, err := b.Campaign(ctx, "b")
	require.NoError(t, err)
	require.Greater(t, termB.Token(), termA)
	// A's lock was neither released nor renewed: B led only once its lease,
	// renewed at most a retry period before the stop, ran out.
	assert.GreaterOrEqual(t, time.Since(stopped), lease-retry)
	require.NoError(t, write("b", termB.Token()))
	close(wake)
	require.ErrorIs(t, <-wrote, redisfence.ErrStaleToken)
	require.NoError(t, <-ranA)
	assert.Equal(t, "b", c.Get(ctx, "writer:"+redisfence.Tag("ignored")).Val())
	resign(t, termB)
}

// Run returns fn's error when fn fails while leading, after resigning.
func TestRunReturnsFnError(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	e := candidate(t, c, "fails")
	boom := assert.AnError
	var seen *election.Term
	err := e.Run(ctx, "x", func(ctx context.Context, term *election.Term) error { seen = term; return boom })
	require.ErrorIs(t, err, boom)
	require.ErrorIs(t, context.Cause(seen.Context()), election.ErrResigned)
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader)
}
