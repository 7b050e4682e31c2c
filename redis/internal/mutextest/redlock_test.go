package mutextest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"
	"github.com/redfence/redfence/redis/internal/redisproto"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// redlockNodes starts n independent redis-servers and returns plain go-redis
// clients for them (ContextTimeoutEnabled off, go-redis's default): Redlock
// must bound its node calls itself.
func redlockNodes(t *testing.T, n int) ([]redis.UniversalClient, []*redistest.RedisServer) {
	t.Helper()
	_, srvs := redistest.RedisN(t, n)
	clients := make([]redis.UniversalClient, n)
	for i, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return clients, srvs
}

// newRedlock is a Redlock Locker over clients (redistest.NewRedlock: opts
// are mutex and redlockdriver options), closed at the test's end.
func newRedlock(t *testing.T, clients []redis.UniversalClient, opts ...any) *mutex.Locker {
	t.Helper()
	l, err := redistest.NewRedlock(clients, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

func TestRedlockMutualExclusionAndIncreasingTokens(t *testing.T) {
	clients, _ := redlockNodes(t, 5)
	checkExclusion(t, []*mutex.Locker{newRedlock(t, clients), newRedlock(t, clients)}, "mx", 8, 40)
}

func TestRedlockSurvivesMinorityLoss(t *testing.T) {
	clients, srvs := redlockNodes(t, 5)
	l := newRedlock(t, clients)
	ctx := context.Background()

	lk, err := l.Lock(ctx, "k")
	require.NoError(t, err)
	t0 := lk.Token()
	require.NoError(t, lk.Release(ctx))

	srvs[0].Kill()
	srvs[1].Kill()
	lk, err = l.Lock(ctx, "k")
	require.NoError(t, err, "3 of 5 nodes are a majority")
	t1 := lk.Token()
	assert.Greater(t, t1, t0)
	require.NoError(t, lk.Release(ctx))

	srvs[2].Kill()
	late := testutil.MeasureLateness(t)
	start := time.Now()
	_, err = l.TryLock(ctx, "k")
	require.Error(t, err)
	assert.NotErrorIs(t, err, mutex.ErrNotAcquired, "unavailability is not contention")
	assert.Less(t, time.Since(start), late.Bound(time.Second))

	for _, s := range srvs[:3] {
		s.Restart() // empty: their counters are gone
	}
	lk, err = l.Lock(ctx, "k")
	require.NoError(t, err)
	assert.Greater(t, lk.Token(), t1, "tokens never go backwards after nodes come back empty")
	require.NoError(t, lk.Release(ctx))
}

// TestRedlockCounterAheadExcluded: a node whose counter is far ahead (as a
// fast clock would make it) drives one acquisition's token; the raise round
// carries that token to a majority, so later acquisitions without that node
// still issue larger tokens.
func TestRedlockCounterAheadExcluded(t *testing.T) {
	clients, srvs := redlockNodes(t, 5)
	l := newRedlock(t, clients)
	ctx := context.Background()
	ahead := time.Now().Add(24 * time.Hour).UnixMicro()
	require.NoError(t, clients[0].Set(ctx, redisproto.LockKey(redisproto.DefaultPrefix, "fast"), fmt.Sprint(ahead), time.Hour).Err())

	// An explicit owner makes the attempt wait for every node (a random one
	// stops at the first majority, which may leave the fast node out).
	lk, err := l.Lock(ctx, "fast", mutex.WithOwner("first"))
	require.NoError(t, err)
	t1 := lk.Token()
	require.Greater(t, t1, ahead, "the fast node's counter set the token")
	require.NoError(t, lk.Release(ctx))

	srvs[0].Kill() // the fast node is out of every later quorum
	for range 3 {
		lk, err := l.Lock(ctx, "fast")
		require.NoError(t, err)
		assert.Greater(t, lk.Token(), t1)
		t1 = lk.Token()
		require.NoError(t, lk.Release(ctx))
	}
}

// TestRedlockPausedNode: one SIGSTOPped node of 5 costs Lock and Unlock at
// most the per-node timeout, although the clients wait 3 s by default.
func TestRedlockPausedNode(t *testing.T) {
	clients, srvs := redlockNodes(t, 5)
	const nodeTimeout = 100 * time.Millisecond
	l := newRedlock(t, clients, redlockdriver.WithStoreTimeout(nodeTimeout))
	ctx := context.Background()
	// Warm every connection and script first.
	lk, err := l.Lock(ctx, "p")
	require.NoError(t, err)
	require.NoError(t, lk.Release(ctx))

	srvs[4].Pause()
	t.Cleanup(srvs[4].Resume) // before Close, so its pending calls finish
	late := testutil.MeasureLateness(t)
	start := time.Now()
	lk, err = l.Lock(ctx, "p")
	require.NoError(t, err)
	took := time.Since(start)
	assert.Less(t, took, late.Bound(nodeTimeout*2+50*time.Millisecond), "Lock took %v", took)
	start = time.Now()
	require.NoError(t, lk.Release(ctx))
	assert.Less(t, time.Since(start), late.Bound(nodeTimeout+50*time.Millisecond))
	srvs[4].Resume()
}

func TestRedlockRenewalAndLoss(t *testing.T) {
	clients, srvs := redlockNodes(t, 5)
	l := newRedlock(t, clients)
	ctx := context.Background()
	// A renewal may come up to two thirds of a lease late: 660 ms, which a
	// busy two-core host does not reach.
	lk, err := l.Lock(ctx, "renew", mutex.WithTTL(time.Second))
	require.NoError(t, err)
	start := time.Now()
	select {
	case <-lk.Context().Done():
		t.Fatalf("lost after %v: %v", time.Since(start), context.Cause(lk.Context()))
	case <-time.After(3 * time.Second): // three leases: renewal must have kept it
	}
	ttl, err := lk.TTL(ctx)
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Duration(0))

	// Without a majority renewal cannot confirm: the lock is lost by its
	// lease deadline.
	late := testutil.MeasureLateness(t)
	for _, s := range srvs[:3] {
		s.Kill()
	}
	select {
	case <-lk.Context().Done():
		assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
		// The last confirmed renewal set the deadline; nothing moved it since.
		assert.Less(t, time.Since(lk.Deadline()), late.Bound(50*time.Millisecond), "lost after the lease deadline")
	case <-time.After(5 * time.Second):
		t.Fatal("the lock was not lost without a majority")
	}
	assert.ErrorIs(t, lk.Release(ctx), mutex.ErrNotHeld)
}

func TestRedlockReentrancyAndWake(t *testing.T) {
	clients, _ := redlockNodes(t, 3)
	a, b := newRedlock(t, clients), newRedlock(t, clients)
	ctx := context.Background()

	lk, err := a.Lock(ctx, "re")
	require.NoError(t, err)
	inner, err := a.Lock(lk.Context(), "re")
	require.NoError(t, err)
	assert.Same(t, lk, inner)
	require.NoError(t, inner.Release(ctx))
	_, err = b.TryLock(ctx, "re")
	require.ErrorIs(t, err, mutex.ErrNotAcquired, "the inner Unlock does not free it")

	o1, err := a.Lock(ctx, "owned", mutex.WithOwner("job-7"))
	require.NoError(t, err)
	o2, err := b.Lock(ctx, "owned", mutex.WithOwner("job-7"))
	require.NoError(t, err, "the same owner re-enters from another Locker")
	assert.Equal(t, o1.Token(), o2.Token())
	require.NoError(t, o2.Release(ctx))
	require.NoError(t, o1.Release(ctx))

	// A waiter on another Locker is woken by the release notification.
	got := make(chan time.Time, 1)
	go func() {
		w, err := b.Lock(ctx, "re")
		if assert.NoError(t, err) {
			got <- time.Now()
			_ = w.Release(ctx)
		}
	}()
	require.Eventually(t, func() bool { return mutexhooks.WaitersOf(b, "re") > 0 }, 5*time.Second, time.Millisecond)
	late := testutil.MeasureLateness(t)
	released := time.Now()
	require.NoError(t, lk.Release(ctx))
	select {
	case at := <-got:
		assert.Less(t, at.Sub(released), late.Bound(200*time.Millisecond), "woken by the release, not the 50ms-1s poll")
	case <-time.After(5 * time.Second):
		t.Fatal("waiter never acquired")
	}
}

// A Redlock call still out to a slow node when the quorum decided is not
// the caller's any more: cancelling the Lock's ctx once Lock returned does
// not cut it short, so the slow node still gets its script loaded (a call
// cut short there left every later Lock a round trip behind).
func TestRedlockCallsOutliveTheCallersCancel(t *testing.T) {
	_, srvs := redistest.RedisN(t, 3)
	slow := testutil.Proxy(t, srvs[2].Addr())
	slow.SetLatency(20 * time.Millisecond)
	clients := make([]redis.UniversalClient, 3)
	for i, addr := range []string{srvs[0].Addr(), srvs[1].Addr(), slow.Addr()} {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	l := newRedlock(t, clients)
	ctx, cancel := context.WithCancel(context.Background())
	lk, err := l.Lock(ctx, "k", mutex.WithTTL(10*time.Second))
	cancel() // as a deferred cancel would, right after Lock returned
	require.NoError(t, err)
	direct := srvs[2].Client()
	deadline, stop := context.WithTimeout(context.Background(), 10*time.Second)
	defer stop()
	waitFor(t, deadline, "the slow node never got the acquire script", func() bool {
		ok, err := direct.ScriptExists(deadline, redisproto.AcquireScript.Hash()).Result()
		return err == nil && ok[0]
	})
	require.NoError(t, lk.Release(context.Background()))
}
