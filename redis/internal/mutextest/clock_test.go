package mutextest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// rateClock runs at rate × real time from now on.
func rateClock(rate float64) func() time.Time {
	base := time.Now()
	return func() time.Time { return base.Add(time.Duration(float64(time.Since(base)) * rate)) }
}

// TestClockDriftAssumption shows, with WithClock, what the drift margin is
// for: a holder whose clock runs slow within the margin gives the lock up
// before Redis does; beyond it, it still believes in a lease Redis has
// already handed to someone else.
func TestClockDriftAssumption(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	other := newLocker(t, c)

	t.Run("within the margin", func(t *testing.T) {
		// 1% slow against a 20% margin: gives up ~190 ms before Redis does,
		// room for a busy host's late timer and the TryLock after it.
		l := newLocker(t, c, mutex.WithClock(rateClock(0.99)), mutex.WithClockDrift(0.2, 0))
		lk, err := l.Lock(ctx, "drift-ok", mutex.WithTTL(time.Second), mutex.WithAutoRenew(false))
		require.NoError(t, err)
		<-lk.Context().Done()
		require.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
		_, err = other.TryLock(ctx, "drift-ok")
		assert.ErrorIs(t, err, mutex.ErrNotAcquired, "Redis still holds the lease when the holder gives it up")
	})

	t.Run("beyond the margin", func(t *testing.T) {
		// Half as fast against the default 1% + 2ms: the holder's lease
		// outlives Redis's by ~490 ms, room for a busy host's polling.
		l := newLocker(t, c, mutex.WithClock(rateClock(0.5)))
		lk, err := l.Lock(ctx, "drift-bad", mutex.WithTTL(500*time.Millisecond), mutex.WithAutoRenew(false))
		require.NoError(t, err)
		var second *mutex.Lock
		require.Eventually(t, func() bool {
			second, err = other.TryLock(ctx, "drift-bad")
			return err == nil
		}, 2*time.Second, 5*time.Millisecond)
		assert.NoError(t, lk.Context().Err(), "the slow holder still believes it holds the lock: two holders")
		assert.Greater(t, second.Token(), lk.Token(), "the token still tells them apart")
		require.NoError(t, second.Release(ctx))
		<-lk.Context().Done() // it does give up, late
	})
}
