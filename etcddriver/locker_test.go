package etcddriver_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// The Locker's behaviour over the driver, on one member and on three.

// Two Lockers, each over its own client, exclude each other, and every
// token exceeds the one before (create revisions).
func TestMutualExclusion(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		a, _, _ := locker(t, c)
		b, _, _ := locker(t, c)
		ctx := testCtx(t)
		var inside atomic.Int32
		var last int64
		var wg sync.WaitGroup
		for _, l := range []*mutex.Locker{a, b} {
			for range 3 {
				wg.Go(func() {
					for range 10 {
						lk, err := l.Lock(ctx, "x", mutex.WithRetry(time.Millisecond, 20*time.Millisecond))
						if !assert.NoError(t, err) {
							return
						}
						assert.Equal(t, int32(1), inside.Add(1), "two holders at once")
						assert.Greater(t, lk.Token(), last, "tokens increase")
						last = lk.Token()
						inside.Add(-1)
						assert.NoError(t, lk.Release(ctx))
					}
				})
			}
		}
		wg.Wait()
	})
}

// Waiters of one Locker get the lock in arrival order, each from the Release
// before it: the driver has no hand-off, so the Locker releases and wakes
// its next waiter, whose poll (an hour, the holder's lease) could not have.
func TestWaitersOfOneLockerInOrder(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		l, _, _ := locker(t, c)
		ctx := testCtx(t)
		lk, err := l.Lock(ctx, "q", mutex.WithTTL(time.Hour))
		require.NoError(t, err)
		type got struct {
			i     int
			token int64
		}
		order := make(chan got, 5)
		var wg sync.WaitGroup
		for i := range 5 {
			wg.Go(func() {
				w, err := l.Lock(ctx, "q", mutex.WithRetry(time.Hour, time.Hour), mutex.WithTTL(time.Hour))
				if assert.NoError(t, err) {
					order <- got{i, w.Token()}
					assert.NoError(t, w.Release(ctx))
				}
			})
			require.Eventually(t, func() bool { return waiters(l, "q") == i+1 }, 10*time.Second, time.Millisecond,
				"waiter %d queued", i)
		}
		require.NoError(t, lk.Release(ctx))
		wg.Wait()
		close(order)
		want, last := 0, lk.Token()
		for g := range order {
			assert.Equal(t, want, g.i, "arrival order")
			assert.Greater(t, g.token, last, "each a new token")
			want, last = want+1, g.token
		}
		assert.Equal(t, 5, want)
	})
}

// A waiter of another Locker is woken by the watch when the holder
// releases: its poll, bounded by the holder's hour-long lease, would not
// come within the test's minute. The release comes after the waiter's
// attempt that followed its watch (its second) found the key held, and
// after etcd created the watch's stream.
func TestWatchWakesOtherLocker(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		a, _, _ := locker(t, c)
		bb, _ := driver(t, c)
		ob := &observed{Driver: bb}
		var woken atomic.Int32
		ob.onWake = func() { woken.Add(1) }
		b := lockerOn(t, ob)
		ctx := testCtx(t)
		lk, err := a.Lock(ctx, "w", mutex.WithTTL(time.Hour))
		require.NoError(t, err)
		got := make(chan *mutex.Lock, 1)
		go func() {
			w, err := b.Lock(ctx, "w", mutex.WithRetry(time.Hour, time.Hour))
			assert.NoError(t, err)
			got <- w
		}()
		require.Eventually(t, func() bool { return ob.held.Load() == 2 && etcddriver.Streams(bb) == 1 },
			10*time.Second, time.Millisecond, "the waiter parked, watching the key")
		require.Zero(t, woken.Load(), "the key is held")
		require.NoError(t, lk.Release(ctx))
		w := <-got
		require.NotNil(t, w)
		assert.Greater(t, w.Token(), lk.Token())
		assert.Equal(t, int32(2), ob.held.Load(), "woken once, by the release")
		assert.Positive(t, woken.Load(), "by the watch")
		require.Eventually(t, func() bool { return etcddriver.Watching(bb) == 0 }, 10*time.Second, time.Millisecond,
			"nobody waits: the watch stopped")
		require.NoError(t, w.Release(ctx))
	})
}

// Reentrancy through the context (locally) and through an owner id (in
// etcd): the same token, one count per Lock, and only the last Release
// frees the key.
func TestReentrancy(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		a, _, _ := locker(t, c)
		b, _, _ := locker(t, c)
		ctx := testCtx(t)
		first, err := a.Lock(ctx, "r", mutex.WithOwner("job-7"))
		require.NoError(t, err)
		again, err := a.Lock(first.Context(), "r")
		require.NoError(t, err)
		assert.Same(t, first, again, "re-entered through the context")
		require.NoError(t, again.Release(ctx))
		second, err := b.Lock(ctx, "r", mutex.WithOwner("job-7"))
		require.NoError(t, err)
		assert.Equal(t, first.Token(), second.Token(), "re-entry keeps the token")
		info, err := operator(t, b).Inspect(ctx, "r")
		require.NoError(t, err)
		assert.Equal(t, 2, info.Count)

		require.NoError(t, second.Release(ctx))
		_, err = b.TryLock(ctx, "r")
		assert.ErrorIs(t, err, mutex.ErrNotAcquired, "one count is left")
		require.NoError(t, first.Release(ctx))
		lk, err := b.TryLock(ctx, "r")
		require.NoError(t, err, "the last Release freed it")
		assert.Greater(t, lk.Token(), first.Token())
		require.NoError(t, lk.Release(ctx))
	})
}

// Renewal keeps a lock past its lease: the lease is the server's minimum
// (whole seconds), the lock is held for two of them, and another Locker
// still cannot take it.
func TestRenewalKeepsLock(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		a, _, _ := locker(t, c)
		b, _, _ := locker(t, c)
		ctx := testCtx(t)
		lk, err := a.Lock(ctx, "n", mutex.WithTTL(time.Second))
		require.NoError(t, err)
		past := time.NewTimer(2 * minLease(t, c))
		defer past.Stop()
		select {
		case <-past.C:
		case <-lk.Context().Done():
			t.Fatalf("lost while renewed: %v", context.Cause(lk.Context()))
		}
		_, err = b.TryLock(ctx, "n")
		assert.ErrorIs(t, err, mutex.ErrNotAcquired, "still held past two leases")
		ttl, err := lk.TTL(ctx)
		require.NoError(t, err, "held")
		assert.Less(t, ttl, 2*time.Second, "a 1 s lease, to the second")
		require.NoError(t, lk.Release(ctx))
	})
}

// The loss signal: the key deleted behind the holder's back ends its
// Lock's context with ErrLockLost at the next renewal, though its lease is
// still alive.
func TestLossSignalWhenKeyDeleted(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		a, _, cli := locker(t, c)
		ctx := testCtx(t)
		late := testutil.MeasureLateness(t)
		lk, err := a.Lock(ctx, "g", mutex.WithTTL(time.Second))
		require.NoError(t, err)
		_, err = cli.Delete(ctx, "t/g")
		require.NoError(t, err)
		bound := time.NewTimer(late.Bound(time.Second))
		defer bound.Stop()
		select {
		case <-lk.Context().Done():
			assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
		case <-bound.C:
			t.Fatal("the holder was not told within a lease")
		}
		assert.ErrorIs(t, lk.Release(ctx), mutex.ErrNotHeld)
	})
}

// Close releases what the Locker holds and closes the Driver, which ends
// its watches; the Driver's later calls fail with ErrClosed, sending
// nothing, and closing it again is harmless.
func TestClose(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		b, cli := driver(t, c)
		l, err := mutex.New(b)
		require.NoError(t, err)
		ctx := testCtx(t)
		_, err = l.Lock(ctx, "c", mutex.WithTTL(time.Hour))
		require.NoError(t, err)
		r, err := cli.Get(ctx, testPrefix+"c")
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1, "the premise: the lock's key")
		_, stop := b.Watch("c", func() {})
		require.Eventually(t, func() bool { return etcddriver.Watching(b) == 1 }, 10*time.Second, time.Millisecond)

		require.NoError(t, l.Close())
		r, err = cli.Get(ctx, testPrefix+"c")
		require.NoError(t, err)
		assert.Empty(t, r.Kvs, "Close released the lock")
		assert.Zero(t, etcddriver.Watching(b), "the Locker's Close closed the Driver, which ended the watch")
		stop()
		require.NoError(t, b.Close())
		_, err = b.Acquire(ctx, attempt("c", "o"))
		assert.ErrorIs(t, err, etcddriver.ErrClosed)
		_, err = l.TryLock(ctx, "c")
		assert.ErrorIs(t, err, mutex.ErrClosed)
	})
}
