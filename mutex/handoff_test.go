package mutex_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// TestHandoffOneRoundTrip: goroutines of one Locker queued on a key get the
// lock handed over by the previous holder's Unlock, one script call per
// acquisition instead of a release and an acquire.
func TestHandoffOneRoundTrip(t *testing.T) {
	c, _ := testutil.Redis(t)
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
				assert.NoError(t, lk.Unlock(ctx))
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
	c, _ := testutil.Redis(t)
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
				_ = lk.Unlock(context.Background())
			}
		})
	}
	for range 5 {
		start := time.Now()
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		lk, err := b.Lock(lctx, "busy")
		lcancel()
		require.NoError(t, err, "B starved")
		assert.Less(t, time.Since(start), time.Second, "B waited too long")
		require.NoError(t, lk.Unlock(ctx))
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
				assert.NoError(t, lk.Unlock(ctx))
			}
		}
		wg.Go(func() { waitFor(b, "b") })
		require.Eventually(t, func() bool { return mutex.WaitersOf(b, "fifo") == 1 }, 5*time.Second, time.Millisecond)
		// b's head has tried and queued in Redis before c's.
		require.Eventually(t, func() bool {
			n, _ := c.ZCard(ctx, mutex.QueueOf(mutex.LockKeyOf(a, "fifo"))).Result()
			return n == 1
		}, 5*time.Second, time.Millisecond)
		wg.Go(func() { waitFor(cc, "c") })
		require.Eventually(t, func() bool {
			n, _ := c.ZCard(ctx, mutex.QueueOf(mutex.LockKeyOf(a, "fifo"))).Result()
			return n == 2
		}, 5*time.Second, time.Millisecond)

		require.NoError(t, held.Unlock(ctx))
		assert.Equal(t, "b", <-got, "the Locker that waited longest goes first")
		assert.Equal(t, "c", <-got)
	})
}
