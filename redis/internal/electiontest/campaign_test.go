package electiontest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// After an unclean loss (the leader cut off, its term never resigned) the
// next winner holds the lock for the lock-delay before its term begins;
// after a resignation it does not wait.
func TestLockDelayAfterUncleanLoss(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx := testCtx(t)
	pc, proxy := proxied(t, srv)
	const delay = time.Second
	lost, next := candidate(t, pc, "delay"), candidate(t, c, "delay", election.WithLockDelay(delay))
	inspector, err := admin.New(redistest.Locker(t, c))
	require.NoError(t, err)

	old, err := lost.Campaign(ctx, "old")
	require.NoError(t, err)
	proxy.BlackHole()
	<-old.Context().Done()
	require.ErrorIs(t, context.Cause(old.Context()), election.ErrLost)
	require.Eventually(t, func() bool { // its lease ran out in Redis too
		info, err := inspector.Inspect(ctx, next.Key())
		return err == nil && info.State == admin.Free
	}, 10*time.Second, time.Millisecond)

	// Within less than the delay the lock is free but no term can begin.
	short, cancel := context.WithTimeout(ctx, delay/2)
	_, err = next.Campaign(short, "new")
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorIs(t, err, mutex.ErrNotAcquired)

	start := time.Now()
	term, err := next.Campaign(ctx, "new")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), delay, "timers never fire early")
	assert.Greater(t, term.Token(), old.Token())
	resign(t, term)
	proxy.Heal()
	_ = old.Release(ctx)

	// Resigned: the next term begins well within the delay.
	quick, cancel := context.WithTimeout(ctx, delay/2)
	defer cancel()
	again, err := next.Campaign(quick, "new")
	require.NoError(t, err)
	resign(t, again)
}

// The timing rules are checked when the election is built, and the error
// names the rule that failed.
func TestNewRefusesBadInput(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	for _, tc := range []struct {
		name string
		opts []election.Option
		want string
	}{
		{"lease too short", []election.Option{election.WithTTL(time.Millisecond)}, "lease 1ms is outside"},
		{"renew not below lease minus drift", []election.Option{election.WithTTL(time.Second), election.WithRenewDeadline(time.Second - 5*time.Millisecond)}, "rule lease - drift > renew deadline"},
		{"renew not above retry × jitter", []election.Option{election.WithRenewDeadline(time.Second), election.WithRetryPeriod(900 * time.Millisecond)}, "rule renew deadline > 1.2 × retry period"},
		{"zero renew", []election.Option{election.WithRenewDeadline(0)}, "renew deadline 0s must be positive"},
		{"zero retry", []election.Option{election.WithRetryPeriod(0)}, "retry period 0s must be positive"},
		{"negative lock delay", []election.Option{election.WithLockDelay(-time.Second)}, "lock delay -1s is negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := election.New(l, "bad", tc.opts...)
			require.ErrorIs(t, err, election.ErrInvalid)
			require.ErrorIs(t, err, mutex.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
	_, err := election.New(nil, "x")
	require.ErrorIs(t, err, election.ErrInvalid)
	_, err = election.New(l, "")
	require.ErrorIs(t, err, election.ErrInvalid)
	e, err := election.New(l, "ok", election.WithTTL(time.Second), election.WithRenewDeadline(900*time.Millisecond), election.WithRetryPeriod(100*time.Millisecond))
	require.NoError(t, err)
	var nilCtx context.Context // the bad input under test
	_, err = e.Campaign(nilCtx, "v")
	require.ErrorIs(t, err, election.ErrInvalid)
	_, err = e.Campaign(context.Background(), string(make([]byte, election.MaxValueLen+1)))
	require.ErrorIs(t, err, election.ErrInvalid)
	require.ErrorIs(t, e.Run(context.Background(), "v", nil), election.ErrInvalid)
	var nilTerm *election.Term
	require.ErrorIs(t, nilTerm.Release(context.Background()), election.ErrInvalid)
	_, ok := <-e.Observe(nilCtx)
	require.False(t, ok)
}

// OnStarted and OnStopped are called once each per term, started first,
// however the term ends: resigned, lost, or Run stopped.
func TestCallbacksOncePerTermInOrder(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx := testCtx(t)
	var (
		mu     sync.Mutex
		events []string
		ended  = make(chan struct{}, 8)
	)
	record := func(ev string, term *election.Term) {
		mu.Lock()
		events = append(events, ev+" "+term.Value())
		mu.Unlock()
	}
	opts := []election.Option{
		election.WithOnStarted(func(term *election.Term) { record("started", term) }),
		election.WithOnStopped(func(term *election.Term, cause error) {
			record("stopped", term)
			if errors.Is(cause, election.ErrLost) {
				record("lost", term)
			}
			ended <- struct{}{}
		}),
	}
	pc, proxy := proxied(t, srv)
	e, cut := candidate(t, c, "callbacks", opts...), candidate(t, pc, "callbacks", opts...)

	term, err := e.Campaign(ctx, "resigned")
	require.NoError(t, err)
	resign(t, term)
	resign(t, term) // twice: no second callback
	<-ended

	term, err = cut.Campaign(ctx, "lost")
	require.NoError(t, err)
	proxy.BlackHole()
	<-ended
	proxy.Heal()
	_ = term.Release(ctx)

	run, stop := context.WithCancel(ctx)
	require.NoError(t, e.Run(run, "stopped", func(ctx context.Context, _ *election.Term) error {
		stop()
		<-ctx.Done()
		require.ErrorIs(t, context.Cause(ctx), election.ErrStopped)
		return ctx.Err()
	}))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{
		"started resigned", "stopped resigned",
		"started lost", "stopped lost", "lost lost",
		"started stopped", "stopped stopped",
	}, events)
}

// Candidacies shows this process's waiting campaigns and the terms it
// leads, and forgets each when it ends.
func TestCandidacies(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	e := candidate(t, c, "local")
	assert.Empty(t, e.Candidacies())
	term, err := e.Campaign(ctx, "leader")
	require.NoError(t, err)
	waiting := make(chan error)
	wctx, cancel := context.WithCancel(ctx)
	go func() { _, err := e.Campaign(wctx, "waiter"); waiting <- err }()
	require.Eventually(t, func() bool { return len(e.Candidacies()) == 2 }, 10*time.Second, time.Millisecond)
	got := e.Candidacies()
	assert.Equal(t, election.Candidacy{Value: "leader", Since: term.Since(), Term: term.Token()}, got[0])
	assert.Equal(t, "waiter", got[1].Value)
	assert.Zero(t, got[1].Term)
	cancel()
	require.ErrorIs(t, <-waiting, context.Canceled)
	resign(t, term)
	assert.Empty(t, e.Candidacies())
}
