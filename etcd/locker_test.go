package etcdlock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	etcdlock "github.com/redfence/redfence/etcd"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// Two Lockers, each over its own client, exclude each other, and every
// token exceeds the one before (create revisions).
func TestMutualExclusion(t *testing.T) {
	s := server(t)
	a, _, _ := locker(t, s)
	b, _, _ := locker(t, s)
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
					assert.NoError(t, lk.Unlock(ctx))
				}
			})
		}
	}
	wg.Wait()
}

// counting is a Backend that counts the Held answers it gave.
type counting struct {
	*etcdlock.Backend
	held atomic.Int32
}

func (c *counting) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	g, err := c.Backend.Acquire(ctx, a)
	if err == nil && g.Status == backend.Held {
		c.held.Add(1)
	}
	return g, err
}

// A waiter of another Locker is woken by the watch when the holder
// releases: its poll, bounded by the holder's hour-long lease, would not
// come within the test's minute. The release comes after the waiter's
// attempt that followed its watch (its second) found the key held, and
// after etcd created the watch's stream.
func TestWatchWakesOtherLocker(t *testing.T) {
	s := server(t)
	a, _, _ := locker(t, s)
	bb, _ := driver(t, s)
	cb := &counting{Backend: bb}
	b := mutex.NewWithBackend(cb, mutex.WithPrefix("t/"))
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	ctx := testCtx(t)
	lk, err := a.Lock(ctx, "w", mutex.WithTTL(time.Hour))
	require.NoError(t, err)
	got := make(chan *mutex.Lock, 1)
	go func() {
		w, err := b.Lock(ctx, "w", mutex.WithRetry(time.Hour, time.Hour))
		assert.NoError(t, err)
		got <- w
	}()
	require.Eventually(t, func() bool { return cb.held.Load() == 2 && etcdlock.Streams(bb) == 1 },
		10*time.Second, time.Millisecond, "the waiter parked, watching the key")
	require.NoError(t, lk.Unlock(ctx))
	w := <-got
	require.NotNil(t, w)
	assert.Greater(t, w.Token(), lk.Token())
	assert.Equal(t, int32(2), cb.held.Load(), "woken once, by the release")
	require.Eventually(t, func() bool { return etcdlock.Watching(bb) == 0 }, 10*time.Second, time.Millisecond,
		"nobody waits: the watch stopped")
	require.NoError(t, w.Unlock(ctx))
}

// Reentrancy through an owner id, in etcd: the same token, one count per
// Lock, and only the last Unlock frees the key.
func TestReentrancyWithOwner(t *testing.T) {
	s := server(t)
	a, _, _ := locker(t, s)
	b, _, _ := locker(t, s)
	ctx := testCtx(t)
	first, err := a.Lock(ctx, "r", mutex.WithOwner("job-7"))
	require.NoError(t, err)
	second, err := a.Lock(ctx, "r", mutex.WithOwner("job-7"))
	require.NoError(t, err)
	assert.Equal(t, first.Token(), second.Token(), "re-entry keeps the token")
	info, err := b.Inspect(ctx, "r")
	require.NoError(t, err)
	assert.Equal(t, 2, info.Count)

	require.NoError(t, second.Unlock(ctx))
	_, err = b.TryLock(ctx, "r")
	assert.ErrorIs(t, err, mutex.ErrNotAcquired, "one count is left")
	require.NoError(t, first.Unlock(ctx))
	lk, err := b.TryLock(ctx, "r")
	require.NoError(t, err, "the last Unlock freed it")
	assert.Greater(t, lk.Token(), first.Token())
	require.NoError(t, lk.Unlock(ctx))
}

// Renewal keeps a lock past its lease: the lease is the server's minimum
// (whole seconds), the lock is held for two of them, and another Locker
// still cannot take it.
func TestRenewalKeepsLock(t *testing.T) {
	s := server(t)
	a, _, _ := locker(t, s)
	b, _, _ := locker(t, s)
	ctx := testCtx(t)
	lk, err := a.Lock(ctx, "n", mutex.WithTTL(time.Second))
	require.NoError(t, err)
	past := time.NewTimer(2 * minLease(t, s))
	defer past.Stop()
	select {
	case <-past.C:
	case <-lk.Context().Done():
		t.Fatalf("lost while renewed: %v", context.Cause(lk.Context()))
	}
	_, err = b.TryLock(ctx, "n")
	assert.ErrorIs(t, err, mutex.ErrNotAcquired, "still held past two leases")
	ttl, err := lk.TTL(ctx)
	require.NoError(t, err)
	assert.Positive(t, ttl)
	require.NoError(t, lk.Unlock(ctx))
}

// The loss signal: the key deleted behind the holder's back ends its
// Lock's context with ErrLockLost at the next renewal, though its lease is
// still alive.
func TestLossSignalWhenKeyDeleted(t *testing.T) {
	s := server(t)
	a, _, cli := locker(t, s)
	ctx := testCtx(t)
	late := testutil.MeasureLateness(t)
	lk, err := a.Lock(ctx, "g", mutex.WithTTL(3*time.Second))
	require.NoError(t, err)
	_, err = cli.Delete(ctx, "t/g")
	require.NoError(t, err)
	bound := time.NewTimer(late.Bound(3 * time.Second))
	defer bound.Stop()
	select {
	case <-lk.Context().Done():
		assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	case <-bound.C:
		t.Fatal("the holder was not told within a lease")
	}
	assert.ErrorIs(t, lk.Unlock(ctx), mutex.ErrNotHeld)
}

// Close releases what the Locker holds; the Backend's Close ends its
// watches, and its later calls fail with ErrClosed, sending nothing.
func TestClose(t *testing.T) {
	s := server(t)
	b, cli := driver(t, s)
	l := mutex.NewWithBackend(b)
	ctx := testCtx(t)
	_, err := l.Lock(ctx, "c", mutex.WithTTL(time.Hour))
	require.NoError(t, err)
	require.NoError(t, l.Close())
	r, err := cli.Get(ctx, "c")
	require.NoError(t, err)
	assert.Empty(t, r.Kvs, "Close released the lock")

	_, stop := b.Watch("c", func() {})
	require.NoError(t, b.Close())
	assert.Zero(t, etcdlock.Watching(b), "Close ended the watch")
	stop()
	_, err = b.Acquire(ctx, attempt("c", "o"))
	assert.ErrorIs(t, err, etcdlock.ErrClosed)
	assert.True(t, errors.Is(err, etcdlock.ErrClosed))
}
