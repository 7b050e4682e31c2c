package mutextest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

// Downgrade's outcome is unknown on a server error, and the hold stays
// held as it was. When the downgrade did run, the natural retry succeeds:
// it finds the read the first call left, and the hold stays live (and
// renewed) as a read, not ended as lost while its read lives on the server.
func TestRWDowngradeRetryAfterUnknownOutcome(t *testing.T) {
	_, srv := redistest.Redis(t)
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

// The upgrade check counts only holds still held: Lock through a context
// that kept the values of a read hold already released
// (context.WithoutCancel, as a job queued by the reader does) takes the
// write, as Lock of a plain lock re-enters only a lock still held.
func TestRWUpgradeCheckIgnoresReleasedHold(t *testing.T) {
	c, _ := redistest.Redis(t)
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

// A permit or a lock of the same name in ctx is not a read of the
// RWMutex: Lock and RLock through their contexts take the hold, neither
// ErrUpgrade nor ErrInvalid.
func TestRWUpgradeCheckOnlyForItsOwnHolds(t *testing.T) {
	c, _ := redistest.Redis(t)
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
