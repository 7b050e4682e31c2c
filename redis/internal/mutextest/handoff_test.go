package mutextest

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
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
)

// TestHandoffOneRoundTrip: goroutines of one Locker queued on a key get the
// lock handed over by the previous holder's Unlock, one script call per
// acquisition instead of a release and an acquire.
func TestHandoffOneRoundTrip(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	before, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	const goroutines, rounds = 8, 50
	var inside atomic.Int32
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range rounds {
				lk, err := l.Lock(ctx, "ho")
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, int32(1), inside.Add(1))
				inside.Add(-1)
				assert.NoError(t, lk.Release(ctx))
			}
		})
	}
	wg.Wait()
	after, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	perAcq := float64(evalCalls(after)-evalCalls(before)) / (goroutines * rounds)
	t.Logf("%.2f script calls per acquisition", perAcq)
	assert.Less(t, perAcq, 1.6, "most acquisitions are hand-offs (a release+acquire costs 2)")
}

// TestHandoffLeavesOtherLockersATurn: while goroutines of Locker A keep the
// key busy, a waiter on Locker B still gets it soon: hand-offs in a row are
// capped.
func TestHandoffLeavesOtherLockersATurn(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for ctx.Err() == nil {
				lk, err := a.Lock(ctx, "busy")
				if err != nil {
					return
				}
				time.Sleep(time.Millisecond) // the critical section
				_ = lk.Release(context.Background())
			}
		})
	}
	late := testutil.MeasureLateness(t)
	for range 5 {
		start := time.Now()
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		lk, err := b.Lock(lctx, "busy")
		lcancel()
		require.NoError(t, err, "B starved")
		assert.Less(t, time.Since(start), late.Bound(time.Second), "B waited too long")
		require.NoError(t, lk.Release(ctx))
	}
	cancel()
	wg.Wait()
}

// TestReleaseGoesToTheLockerWaitingLongest: across Lockers, a release
// through Redis is reserved for the Locker whose waiter has waited longest,
// not raced for by all of them.
func TestReleaseGoesToTheLockerWaitingLongest(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b, cc := newLocker(t, c), newLocker(t, c), newLocker(t, c)
		ctx := context.Background()
		held, err := a.Lock(ctx, "fifo")
		require.NoError(t, err)

		got := make(chan string, 2)
		var wg sync.WaitGroup
		defer wg.Wait()
		waitFor := func(l *mutex.Locker, name string) {
			lk, err := l.Lock(ctx, "fifo")
			if assert.NoError(t, err) {
				got <- name
				time.Sleep(20 * time.Millisecond) // hold it a moment
				assert.NoError(t, lk.Release(ctx))
			}
		}
		wg.Go(func() { waitFor(b, "b") })
		require.Eventually(t, func() bool { return mutexhooks.WaitersOf(b, "fifo") == 1 }, 5*time.Second, time.Millisecond)
		// b's head has tried and queued in Redis before c's.
		queue := redisproto.QueueOf(redisproto.LockKey(redisproto.DefaultPrefix, "fifo"))
		awaitQueued(t, c, queue, 1)
		wg.Go(func() { waitFor(cc, "c") })
		awaitQueued(t, c, queue, 2)

		require.NoError(t, held.Release(ctx))
		assert.Equal(t, "b", <-got, "the Locker that waited longest goes first")
		assert.Equal(t, "c", <-got)
	})
}

// TestWaitedMarkCarriesOverAReservation: a release reserved for the first
// queued Locker tells it that others wait too, so that its own release
// notifies the next one. With the fallback poll set to seconds, only a
// notification explains a prompt second hand-over.
func TestWaitedMarkCarriesOverAReservation(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b, cc := newLocker(t, c), newLocker(t, c), newLocker(t, c)
		ctx := context.Background()
		held, err := a.Lock(ctx, "chain")
		require.NoError(t, err)
		slow := mutex.WithRetry(3*time.Second, 4*time.Second)
		queue := redisproto.QueueOf(redisproto.LockKey(redisproto.DefaultPrefix, "chain"))
		wctx, wg := waiters(t)
		bGot := waitLock(wctx, t, wg, b, "chain", slow)
		awaitQueued(t, c, queue, 1)
		cGot := waitLock(wctx, t, wg, cc, "chain", slow)
		awaitQueued(t, c, queue, 2)

		require.NoError(t, held.Release(ctx))
		lk := <-bGot
		require.NotNil(t, lk)
		late := testutil.MeasureLateness(t)
		released := time.Now()
		require.NoError(t, lk.Release(ctx))
		lk = <-cGot
		require.NotNil(t, lk)
		assert.Less(t, time.Since(released), late.Bound(time.Second), "c was not notified of b's release")
		require.NoError(t, lk.Release(ctx))
	})
}

// TestUncontendedReleaseIsQuiet: a release nobody waited for neither reads
// the queue nor publishes; one a waiter found held does both.
func TestUncontendedReleaseIsQuiet(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	ctx := context.Background()
	calls := func(cmd string) int {
		info, err := c.Info(ctx, "commandstats").Result()
		require.NoError(t, err)
		m := regexp.MustCompile(`cmdstat_` + cmd + `:calls=(\d+)`).FindStringSubmatch(info)
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	pub, zr := calls("publish"), calls("zrange")
	for range 10 {
		lk, err := a.Lock(ctx, "quiet")
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	}
	assert.Equal(t, pub, calls("publish"), "uncontended releases published")
	assert.Equal(t, zr, calls("zrange"), "uncontended releases read the queue")

	held, err := a.Lock(ctx, "quiet")
	require.NoError(t, err)
	wctx, wg := waiters(t)
	got := waitLock(wctx, t, wg, b, "quiet")
	// Not just subscribed: b's attempt after the subscription is what marks
	// the lock (and queues b); an Unlock before it frees the lock quietly.
	lockKey := redisproto.LockKey(redisproto.DefaultPrefix, "quiet")
	require.Eventually(t, func() bool {
		return c.ZScore(ctx, redisproto.QueueOf(lockKey), mutexhooks.LockerIDOf(b)).Err() == nil
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, held.Release(ctx))
	lk := <-got
	require.NotNil(t, lk)
	require.NoError(t, lk.Release(ctx))
	assert.Equal(t, pub+1, calls("publish"), "the release a waiter saw publishes once")
	assert.Equal(t, zr+1, calls("zrange"))
}

// TestReservationHoldsBackTryLockAndRunsOut: a release reserved for the
// first queued Locker is not taken by anyone else, TryLock included; when
// that Locker never comes (here a queue entry nobody answers to), the
// reservation runs out and the next waiter gets the lock.
func TestReservationHoldsBackTryLockAndRunsOut(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, b, cc := newLocker(t, c), newLocker(t, c), newLocker(t, c)
	ctx := context.Background()
	held, err := a.Lock(ctx, "res")
	require.NoError(t, err)
	queue := redisproto.QueueOf(redisproto.LockKey(redisproto.DefaultPrefix, "res"))
	wctx, wg := waiters(t)
	got := waitLock(wctx, t, wg, b, "res")
	awaitQueued(t, c, queue, 1)
	require.NoError(t, c.ZAdd(ctx, queue, redis.Z{Score: 0, Member: "ghost"}).Err()) // first in line

	late := testutil.MeasureLateness(t)
	released := time.Now() // before the release script starts the 50 ms reservation
	require.NoError(t, held.Release(ctx))
	_, err = cc.TryLock(ctx, "res")
	require.ErrorIs(t, err, mutex.ErrNotAcquired, "TryLock took a lock reserved for another Locker")
	assert.Equal(t, []string{mutexhooks.LockerIDOf(b)}, c.ZRange(ctx, queue, 0, -1).Val(), "the ghost was popped, b still queued")
	lk := <-got
	require.NotNil(t, lk)
	waited := time.Since(released)
	// Redis counts the reservation's PX in whole milliseconds.
	assert.GreaterOrEqual(t, waited, 48*time.Millisecond, "b took the lock inside the ghost's reservation")
	assert.Less(t, waited, late.Bound(time.Second), "the reservation did not run out")
	require.NoError(t, lk.Release(ctx))
}

// TestHandoffLeavesTheRedisQueue: a Locker whose queued waiter got the lock
// by a local hand-off, with nobody else of it waiting, leaves the key's
// queue in Redis; otherwise the next release would be reserved for it in
// vain and other Lockers would wait out the reservation.
func TestHandoffLeavesTheRedisQueue(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	ctx := context.Background()
	queue := redisproto.QueueOf(redisproto.LockKey(redisproto.DefaultPrefix, "hq"))
	h0, err := a.Lock(ctx, "hq")
	require.NoError(t, err)
	wctx, wg := waiters(t)
	h1 := waitLock(wctx, t, wg, a, "hq")
	awaitQueued(t, c, queue, 1) // a's waiter
	bGot := waitLock(wctx, t, wg, b, "hq", mutex.WithRetry(3*time.Second, 4*time.Second))
	awaitQueued(t, c, queue, 2) // and b

	require.NoError(t, h0.Release(ctx)) // hands the lock to a's waiter
	lk := <-h1
	require.NotNil(t, lk)
	require.Eventually(t, func() bool {
		return slices.Equal(c.ZRange(ctx, queue, 0, -1).Val(), []string{mutexhooks.LockerIDOf(b)})
	}, 5*time.Second, time.Millisecond, "a left the queue")
	late := testutil.MeasureLateness(t)
	released := time.Now()
	require.NoError(t, lk.Release(ctx))
	lk = <-bGot
	require.NotNil(t, lk)
	assert.Less(t, time.Since(released), late.Bound(40*time.Millisecond), "b waited out a reservation for a")
	require.NoError(t, lk.Release(ctx))
}

// waitLock takes key on l in a goroutine owned by wg and sends the Lock
// (nil, with the test failed, if Lock failed). ctx bounds the wait, so a
// test that fails early ends its waiters by cancelling it instead of
// hanging.
func waitLock(ctx context.Context, t *testing.T, wg *sync.WaitGroup, l *mutex.Locker, key string, opts ...mutex.LockOption) <-chan *mutex.Lock {
	ch := make(chan *mutex.Lock, 1)
	wg.Go(func() {
		lk, err := l.Lock(ctx, key, opts...)
		assert.NoError(t, err)
		ch <- lk
	})
	return ch
}

// waiters returns a context for waiting Locks and the WaitGroup owning
// them; at the end of the test the context is cancelled, then the
// goroutines are waited for.
func waiters(t *testing.T) (context.Context, *sync.WaitGroup) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	return ctx, &wg
}

// awaitQueued waits until n Lockers wait in the Redis queue of a lock key.
func awaitQueued(t *testing.T, c redis.UniversalClient, queue string, n int64) {
	t.Helper()
	require.Eventually(t, func() bool { return c.ZCard(context.Background(), queue).Val() == n },
		5*time.Second, time.Millisecond, "%d Lockers queued in %s", n, queue)
}
