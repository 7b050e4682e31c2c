package mutextest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redfence/redfence/redis/internal/redisproto"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
)

// The Example functions find their servers in the environment, as a
// reader's program would.
func TestMain(m *testing.M) {
	redistest.MainWithEnv(m, []string{redistest.EnvRedisAddr, redistest.EnvRedlockAddrs})
}

// deployment is a Redis deployment the lock suite runs against.
type deployment struct {
	name   string
	client func(t *testing.T) redis.UniversalClient
}

var backends = []deployment{
	{"standalone", func(t *testing.T) redis.UniversalClient { c, _ := redistest.Redis(t); return c }},
	{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.RedisCluster(t, 3).Client }},
}

// newLocker is a Locker over one deployment (redistest.NewLocker: opts are
// mutex and redisdriver options), whose Close at the test's end must
// succeed.
func newLocker(t *testing.T, c redis.UniversalClient, opts ...any) *mutex.Locker {
	t.Helper()
	l, err := redistest.NewLocker(c, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

func eachBackend(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b.client(t)) })
	}
}

func TestMutualExclusionAndIncreasingTokens(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		checkExclusion(t, []*mutex.Locker{newLocker(t, c), newLocker(t, c)}, "mx", 8, 200)
	})
}

func TestTryLockOnHeldKeyDoesNotWait(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b := newLocker(t, c), newLocker(t, c)
		ctx := context.Background()
		lk, err := a.Lock(ctx, "try")
		require.NoError(t, err)
		late := testutil.MeasureLateness(t)
		start := time.Now()
		_, err = b.TryLock(ctx, "try")
		assert.ErrorIs(t, err, mutex.ErrNotAcquired)
		assert.Less(t, time.Since(start), late.Bound(100*time.Millisecond), "TryLock waited")
		require.NoError(t, lk.Release(ctx))
		lk, err = b.TryLock(ctx, "try")
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	})
}

// TestReleaseWakesWaiter measures handoffs: from Unlock returning to the
// waiter holding the lock, through pub/sub (other Locker) and directly (same
// Locker). The fallback poll is set to 1s, so only a wake-up is this fast.
func TestReleaseWakesWaiter(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		for _, sameLocker := range []bool{false, true} {
			t.Run(fmt.Sprintf("same locker %v", sameLocker), func(t *testing.T) {
				holder := newLocker(t, c)
				waiterL := holder
				if !sameLocker {
					waiterL = newLocker(t, c)
				}
				ctx := context.Background()
				var handoffs []time.Duration
				late := testutil.MeasureLateness(t)
				for range 9 {
					lk, err := holder.Lock(ctx, "wake")
					require.NoError(t, err)
					got := make(chan time.Time, 1)
					done := make(chan struct{})
					go func() {
						defer close(done)
						w, err := waiterL.Lock(ctx, "wake", mutex.WithRetry(time.Second, time.Second))
						got <- time.Now()
						if assert.NoError(t, err) {
							assert.NoError(t, w.Release(ctx))
						}
					}()
					// Let the waiter subscribe and fail its attempt first.
					require.Eventually(t, func() bool { return waiting(c, "wake") }, 2*time.Second, time.Millisecond)
					released := time.Now()
					require.NoError(t, lk.Release(ctx))
					handoffs = append(handoffs, (<-got).Sub(released))
					<-done
				}
				slices.Sort(handoffs)
				median := handoffs[len(handoffs)/2]
				t.Logf("handoffs: %v", handoffs)
				// A poll would take the 1 s retry; a wake-up, a round trip
				// plus whatever the load measured adds.
				assert.Less(t, median, late.Bound(20*time.Millisecond), "median handoff must be a wake-up, not a poll")
			})
		}
	})
}

// waiting reports whether some client is subscribed to key's release
// channel: the sign that a waiter failed its first attempt and waits.
func waiting(c redis.UniversalClient, key string) bool {
	ctx := context.Background()
	ch := redisproto.ChannelOf(redisproto.LockKey(redisproto.DefaultPrefix, key))
	if cc, ok := c.(*redis.ClusterClient); ok {
		n, _ := cc.PubSubShardNumSub(ctx, ch).Result()
		return n[ch] > 0
	}
	n, _ := c.PubSubNumSub(ctx, ch).Result()
	return n[ch] > 0
}

func TestLockGivesUpAtDeadline(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	lk, err := a.Lock(context.Background(), "deadline")
	require.NoError(t, err)
	defer lk.Release(context.Background())

	late := testutil.MeasureLateness(t)
	start := time.Now() // before the deadline is set, so elapsed covers all of it
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err = b.Lock(ctx, "deadline")
	elapsed := time.Since(start)
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.GreaterOrEqual(t, elapsed, 300*time.Millisecond, "gave up before the deadline")
	assert.Less(t, elapsed, late.Bound(400*time.Millisecond), "returned long after the deadline")
}

// TestLockAgainstPausedServer uses a client with go-redis's defaults (no
// ContextTimeoutEnabled), which by itself would wait its 5s read timeout.
func TestLockAgainstPausedServer(t *testing.T) {
	_, srv := redistest.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	l := newLocker(t, c)
	require.NoError(t, c.Ping(context.Background()).Err())

	srv.Pause()
	late := testutil.MeasureLateness(t)
	for _, try := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		var err error
		if try {
			_, err = l.TryLock(ctx, "paused")
		} else {
			_, err = l.Lock(ctx, "paused")
		}
		cancel()
		elapsed := time.Since(start)
		assert.Error(t, err)
		assert.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Less(t, elapsed, late.Bound(450*time.Millisecond), "TryLock=%v took %v against a paused server", try, elapsed)
	}
	srv.Resume()
	// The abandoned attempts' clean-up leaves the key free.
	lk, err := l.Lock(context.Background(), "paused", mutex.WithRetry(10*time.Millisecond, 50*time.Millisecond))
	require.NoError(t, err)
	require.NoError(t, lk.Release(context.Background()))
}

func TestExpiredLeaseIsNotHeld(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b := newLocker(t, c), newLocker(t, c)
		ctx := context.Background()
		old, err := a.Lock(ctx, "expire", mutex.WithTTL(100*time.Millisecond), mutex.WithAutoRenew(false))
		require.NoError(t, err)
		<-old.Context().Done()
		assert.ErrorIs(t, context.Cause(old.Context()), mutex.ErrLockLost)

		cur, err := b.Lock(ctx, "expire", mutex.WithTTL(5*time.Second))
		require.NoError(t, err)
		assert.Greater(t, cur.Token(), old.Token())
		assert.ErrorIs(t, old.Release(ctx), mutex.ErrNotHeld)
		assert.ErrorIs(t, old.Extend(ctx, time.Second), mutex.ErrNotHeld)
		_, err = old.TTL(ctx)
		assert.ErrorIs(t, err, mutex.ErrNotHeld)

		ttl, err := cur.TTL(ctx)
		require.NoError(t, err, "the new holder keeps its lock")
		assert.Greater(t, ttl, 4*time.Second)
		assert.NoError(t, cur.Context().Err())
		require.NoError(t, cur.Release(ctx))
	})
}

func TestNotHeldWhenExpiredInRedisOnly(t *testing.T) {
	// The lease ran out in Redis (simulated by rewriting it) while the local
	// deadline still holds: Unlock and Extend must change nothing.
	c, _ := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	ctx := context.Background()
	old, err := a.Lock(ctx, "k", mutex.WithAutoRenew(false))
	require.NoError(t, err)
	require.NoError(t, c.Del(ctx, redisproto.LockKey(redisproto.DefaultPrefix, "k")).Err())
	cur, err := b.TryLock(ctx, "k")
	require.NoError(t, err)
	assert.ErrorIs(t, old.Extend(ctx, time.Minute), mutex.ErrNotHeld)
	assert.ErrorIs(t, old.Release(ctx), mutex.ErrNotHeld)
	assert.ErrorIs(t, context.Cause(old.Context()), mutex.ErrLockLost)
	_, err = b.TryLock(ctx, "k")
	assert.ErrorIs(t, err, mutex.ErrNotAcquired, "the new holder still holds")
	require.NoError(t, cur.Release(ctx))
}

func TestAutoRenewalKeepsLock(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b := newLocker(t, c), newLocker(t, c)
		ctx := context.Background()
		// Renewed every third of a lease, a lock survives a renewal up to
		// about two thirds of a lease late: 660 ms here. A busy two-core
		// host reached the 200 ms that a 300 ms lease allows.
		lk, err := a.Lock(ctx, "renew", mutex.WithTTL(time.Second))
		require.NoError(t, err)
		hold := time.NewTimer(3 * time.Second) // the holding period under test (three leases), not synchronisation
		select {
		case <-hold.C:
		case <-lk.Context().Done():
			t.Fatalf("lock lost while renewing: %v", context.Cause(lk.Context()))
		}
		_, err = b.TryLock(ctx, "renew")
		assert.ErrorIs(t, err, mutex.ErrNotAcquired)
		ttl, err := lk.TTL(ctx)
		require.NoError(t, err)
		assert.Positive(t, ttl)
		require.NoError(t, lk.Release(ctx))
		assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrReleased)
	})
}

func TestPausedServerLosesLockBeforeLeaseEnds(t *testing.T) {
	c, srv := redistest.Redis(t)
	l := newLocker(t, c)
	const ttl = 300 * time.Millisecond
	lk, err := l.Lock(context.Background(), "pause", mutex.WithTTL(ttl))
	require.NoError(t, err)

	// Every renewal that succeeded was sent before lastSend, so Redis could
	// free the lock at last-send + ttl at the earliest, and lastSend + ttl is
	// an upper bound of that: the holder's deadline is before it, and its
	// context ends there, as late as this host's timers run.
	late := testutil.MeasureLateness(t)
	lastSend := time.Now()
	srv.Pause()
	defer srv.Resume()
	select {
	case <-lk.Context().Done():
	case <-time.After(2 * time.Second):
		t.Fatal("lock context not cancelled while the server is paused")
	}
	lost := time.Now()
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	assert.Less(t, lost.Sub(lastSend), late.Bound(ttl), "lost after %v, lease %v", lost.Sub(lastSend), ttl)
	assert.True(t, lk.Deadline().Before(lastSend.Add(ttl)))
}

func TestFlushAllLosesLockAtNextRenewal(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b := newLocker(t, c), newLocker(t, c)
		ctx := context.Background()
		lk, err := a.Lock(ctx, "flush", mutex.WithTTL(300*time.Millisecond))
		require.NoError(t, err)
		late := testutil.MeasureLateness(t)
		flushed := time.Now()
		if cc, ok := c.(*redis.ClusterClient); ok {
			require.NoError(t, cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.FlushAll(ctx).Err() }))
		} else {
			require.NoError(t, c.FlushAll(ctx).Err())
		}
		select {
		case <-lk.Context().Done():
		case <-time.After(2 * time.Second):
			t.Fatal("lock context not cancelled after FLUSHALL")
		}
		assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
		assert.Less(t, time.Since(flushed), late.Bound(300*time.Millisecond), "lost at the next renewal, within a TTL")
		next, err := b.TryLock(ctx, "flush")
		require.NoError(t, err)
		assert.Greater(t, next.Token(), lk.Token())
		require.NoError(t, next.Release(ctx))
	})
}

func TestTokensGrowAcrossRestartAndCounterLoss(t *testing.T) {
	c, srv := redistest.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	take := func() int64 {
		t.Helper()
		lk, err := l.Lock(ctx, "tok")
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
		return lk.Token()
	}
	t1 := take()
	t2 := take()
	assert.Greater(t, t2, t1)

	srv.Restart() // data gone
	require.Eventually(t, func() bool { return c.Ping(ctx).Err() == nil }, 5*time.Second, 10*time.Millisecond)
	t3 := take()
	assert.Greater(t, t3, t2, "after a restart without data")

	require.NoError(t, c.Del(ctx, redisproto.LockKey(redisproto.DefaultPrefix, "tok")).Err()) // the counter expired
	t4 := take()
	assert.Greater(t, t4, t3, "after the counter expired")

	// A counter ahead of the clock (a node whose clock ran fast) still wins.
	ahead := t4 + int64(time.Hour/time.Microsecond)
	require.NoError(t, c.Set(ctx, redisproto.LockKey(redisproto.DefaultPrefix, "tok"), fmt.Sprint(ahead), time.Hour).Err())
	assert.Equal(t, ahead+1, take())
}

// The fencing counter outlives use by the fence TTL: one hour by default
// (which the acquire script applies itself when the call leaves it out), or
// the driver's WithFenceTTL, or twice a longer lease.
func TestCounterKeyTTL(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []any
		lock []mutex.LockOption
		want time.Duration
	}{
		{"default", nil, nil, time.Hour},
		{"WithFenceTTL", []any{redisdriver.WithFenceTTL(2 * time.Hour)}, nil, 2 * time.Hour},
		{"long lease", nil, []mutex.LockOption{mutex.WithTTL(45 * time.Minute), mutex.WithAutoRenew(false)}, 90 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newLocker(t, c, tc.opts...)
			for _, held := range []bool{true, false} {
				lk, err := l.Lock(ctx, "ttl-"+tc.name, tc.lock...)
				require.NoError(t, err)
				if !held {
					require.NoError(t, lk.Release(ctx))
				}
				d, err := c.PTTL(ctx, redisproto.LockKey(redisproto.DefaultPrefix, "ttl-"+tc.name)).Result()
				require.NoError(t, err)
				assert.LessOrEqual(t, d, tc.want, "held %v", held)
				assert.Greater(t, d, tc.want-time.Minute, "held %v", held)
				if held {
					require.NoError(t, lk.Release(ctx))
				}
			}
		})
	}
}

func TestReentrancy(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b := newLocker(t, c), newLocker(t, c)
		ctx := context.Background()

		t.Run("through the context", func(t *testing.T) {
			outer, err := a.Lock(ctx, "re")
			require.NoError(t, err)
			inner, err := a.Lock(outer.Context(), "re")
			require.NoError(t, err)
			assert.Same(t, outer, inner)
			assert.Equal(t, outer.Token(), inner.Token())
			// A context derived from the lock's context re-enters too.
			derived, cancel := context.WithCancel(inner.Context())
			again, err := a.TryLock(derived, "re")
			cancel()
			require.NoError(t, err)
			require.NoError(t, again.Release(ctx))

			require.NoError(t, inner.Release(ctx))
			assert.NoError(t, outer.Context().Err(), "the inner Unlock must not free the lock")
			_, err = b.TryLock(ctx, "re")
			assert.ErrorIs(t, err, mutex.ErrNotAcquired, "still held after the inner Unlock")
			require.NoError(t, outer.Release(ctx))
			lk, err := b.TryLock(ctx, "re")
			require.NoError(t, err, "free after the last Unlock")
			require.NoError(t, lk.Release(ctx))
			assert.ErrorIs(t, outer.Release(ctx), mutex.ErrNotHeld)
		})

		t.Run("with an owner id across lockers", func(t *testing.T) {
			first, err := a.Lock(ctx, "owned", mutex.WithOwner("worker-1"))
			require.NoError(t, err)
			_, err = b.TryLock(ctx, "owned", mutex.WithOwner("worker-10"))
			assert.ErrorIs(t, err, mutex.ErrNotAcquired, "the whole owner id is compared, not a prefix")
			second, err := b.TryLock(ctx, "owned", mutex.WithOwner("worker-1"))
			require.NoError(t, err)
			assert.Equal(t, first.Token(), second.Token())
			require.NoError(t, second.Release(ctx))
			_, err = b.TryLock(ctx, "owned")
			assert.ErrorIs(t, err, mutex.ErrNotAcquired, "one count left")
			require.NoError(t, first.Release(ctx))
			lk, err := b.TryLock(ctx, "owned")
			require.NoError(t, err)
			assert.Greater(t, lk.Token(), first.Token())
			require.NoError(t, lk.Release(ctx))
		})
	})
}

func TestDo(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	boom := errors.New("boom")
	var seen *mutex.Lock
	err := l.Do(ctx, "do", func(ctx context.Context, lk *mutex.Lock) error {
		seen = lk
		assert.NoError(t, ctx.Err())
		return boom
	})
	assert.ErrorIs(t, err, boom)
	assert.ErrorIs(t, context.Cause(seen.Context()), mutex.ErrReleased)

	assert.PanicsWithValue(t, "inside", func() {
		_ = l.Do(ctx, "do", func(ctx context.Context, lk *mutex.Lock) error { panic("inside") })
	})
	lk, err := l.TryLock(ctx, "do")
	require.NoError(t, err, "a panic inside Do releases the lock")
	require.NoError(t, lk.Release(ctx))
}

func TestCloseReleasesHeldLocks(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, err := redistest.NewLocker(c)
	require.NoError(t, err)
	b := newLocker(t, c)
	ctx := context.Background()
	lk, err := a.Lock(ctx, "close")
	require.NoError(t, err)
	waitErr := make(chan error, 1)
	go func() { _, err := a.Lock(ctx, "other-held-by-b"); waitErr <- err }()

	require.NoError(t, a.Close())
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrReleased)
	got, err := b.TryLock(ctx, "close")
	require.NoError(t, err, "Close released the lock")
	require.NoError(t, got.Release(ctx))
	_, err = a.Lock(ctx, "close")
	assert.ErrorIs(t, err, mutex.ErrClosed)
	// The goroutine either got its lock before Close (then released) or ErrClosed.
	if err := <-waitErr; err != nil {
		assert.ErrorIs(t, err, mutex.ErrClosed)
	}
	assert.NoError(t, a.Close(), "Close twice is fine")
}
