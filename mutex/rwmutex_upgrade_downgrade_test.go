package mutex_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend/redisdriver"
)

// Review (issue 39): stretch raises a key's TTL only when the key has one
// (PTTL ~= -1), and every key the scripts create has none (-1), so the
// read-write lock's and the semaphore's keys never expire: one hash and
// sorted sets per name ever used, forever, against the documented key TTL
// (the fence TTL past the last use).
func TestReviewRWAndSemaphoreKeysExpireAfterLastUse(t *testing.T) {
	c, _ := testutil.Redis(t)
	l := newLocker(t, c, redisdriver.WithFenceTTL(time.Second))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rw := rwMutex(t, l, "gone", mutex.WithTTL(100*time.Millisecond))
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	require.NoError(t, r.Release(ctx))
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))
	p, err := semaphore(t, l, "gone", 1, mutex.WithTTL(100*time.Millisecond)).Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, p.Release(ctx))

	keys := c.Keys(ctx, "*").Val()
	require.NotEmpty(t, keys)
	for _, k := range keys {
		assert.Positive(t, c.PTTL(ctx, k).Val(), "key %s has no TTL", k)
	}
	assert.Eventually(t, func() bool { return c.DBSize(ctx).Val() == 0 }, 10*time.Second, 10*time.Millisecond,
		"the keys outlived the fence TTL (1s) past their last use")
}

// Review (issue 39): Downgrade's outcome is unknown on a server error, and
// the hold "stays held as it was"; but when the downgrade did run, the
// natural retry finds no write, answers ErrNotHeld and ends the hold as
// lost, though its read is live on the server (and not renewed any more).
// A retry of a downgrade that ran must succeed.
func TestReviewRWDowngradeRetryAfterUnknownOutcome(t *testing.T) {
	_, srv := testutil.Redis(t)
	// Not context-aware: a call given up on still runs on the server.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	rw := rwMutex(t, newLocker(t, c), "down-unknown")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	warm, err := rwMutex(t, newLocker(t, c), "warm").Lock(ctx) // the script is loaded: no NOSCRIPT round
	require.NoError(t, err)
	require.NoError(t, warm.Downgrade(ctx))
	require.NoError(t, warm.Release(ctx))
	w, err := rw.Lock(ctx)
	require.NoError(t, err)

	require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", "300", "WRITE").Err())
	short, cancelShort := context.WithTimeout(ctx, 50*time.Millisecond)
	err = w.Downgrade(short)
	cancelShort()
	require.Error(t, err, "the downgrade waits behind the pause")
	require.Eventually(t, func() bool { // the pause ends; the downgrade runs
		st, err := rw.State(ctx)
		return err == nil && st.Writer == nil && len(st.Readers) == 1
	}, 10*time.Second, 5*time.Millisecond)

	assert.NoError(t, w.Downgrade(ctx), "the retry of a downgrade that ran")
	assert.NoError(t, w.Context().Err(), "the hold is live on the server: %v", context.Cause(w.Context()))
	assert.False(t, w.Write())
	assert.NoError(t, w.Release(ctx))
}

// Review (issue 39): the upgrade check finds a hold in ctx whether or not
// it is still held: Lock through a context that kept the values of a read
// hold already unlocked (context.WithoutCancel, as a job queued by the
// reader does) returns ErrUpgrade though nothing is read, while Lock of a
// plain lock re-enters only a lock still held.
func TestReviewRWUpgradeCheckIgnoresReleasedHold(t *testing.T) {
	c, _ := testutil.Redis(t)
	l := newLocker(t, c)
	rw := rwMutex(t, l, "released")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	other, err := rwMutex(t, l, "other").RLock(ctx) // a hold of the Locker: the check runs
	require.NoError(t, err)
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	later := context.WithoutCancel(r.Context())
	require.NoError(t, r.Release(ctx))

	w, err := rw.TryLock(later)
	require.NoError(t, err, "no read is held: nothing to upgrade")
	require.NoError(t, w.Release(ctx))
	r2, err := rw.TryRLock(later)
	require.NoError(t, err, "no hold of the lock is held: nothing to re-enter")
	require.NoError(t, r2.Release(ctx))
	require.NoError(t, other.Release(ctx))
}

// Review (issue 39): Close makes a waiting writer return ErrClosed; once
// both returned, its mark is out, so that readers of other Lockers are let
// in at once rather than one lease (a minute) later.
func TestReviewRWCloseTakesWaitingWriterMarkOut(t *testing.T) {
	c, _ := testutil.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	readers := rwMutex(t, newLocker(t, c), "close-mark")
	r, err := readers.RLock(ctx)
	require.NoError(t, err)
	l := mustLocker(t, c)
	writer := rwMutex(t, l, "close-mark", mutex.WithTTL(time.Minute))
	got := make(chan error, 1)
	go func() { _, err := writer.Lock(ctx); got <- err }()
	require.Eventually(t, func() bool {
		st, err := readers.State(ctx)
		return err == nil && st.Waiting == 1
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Close())
	require.ErrorIs(t, <-got, mutex.ErrClosed)
	r2, err := readers.TryRLock(ctx)
	require.NoError(t, err, "Close left the waiting writer's mark")
	require.NoError(t, r2.Release(ctx))
	require.NoError(t, r.Release(ctx))
}

// Review (issue 39), holds: a permit or a lock of the same name in ctx is
// not a read of the RWMutex: Lock and RLock through their contexts take
// the hold, neither ErrUpgrade nor ErrInvalid.
func TestReviewRWUpgradeCheckOnlyForItsOwnHolds(t *testing.T) {
	c, _ := testutil.Redis(t)
	l := newLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rw := rwMutex(t, l, "same")
	p, err := semaphore(t, l, "same", 1).Acquire(ctx)
	require.NoError(t, err)
	lk, err := l.Lock(p.Context(), "same")
	require.NoError(t, err)
	w, err := rw.TryLock(lk.Context())
	require.NoError(t, err, "a permit and a lock of the name are not reads")
	require.NoError(t, w.Release(ctx))
	r, err := rw.TryRLock(lk.Context())
	require.NoError(t, err)
	require.NoError(t, r.Release(ctx))
	require.NoError(t, lk.Release(ctx))
	require.NoError(t, p.Release(ctx))
}
