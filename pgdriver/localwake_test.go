package pgdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// TestLocalReleaseWakesPollingWaiter: with no listener a Locker's waiters
// poll, but a release by the same Locker wakes its own waiter for that
// semaphore or read-write lock at once. Leases are three minutes and polls
// one (a waiting writer renews its mark at a third of its lease), so a
// waiter that is not woken misses the test's deadline. The waiter is parked once it was refused twice (its
// first attempt, and the one after it subscribed), counted by the
// Locker's contention metric.
func TestLocalReleaseWakesPollingWaiter(t *testing.T) {
	_, schema := setup(t)
	pool, err := pgxpool.New(t.Context(), testutil.PostgresURL(t))
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	reader := sdkmetric.NewManualReader()
	l, err := mutex.New(driverOf(t, pool, schema), mutex.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	long := []mutex.LockOption{mutex.WithTTL(3 * time.Minute), mutex.WithRetry(time.Minute, time.Minute)}
	refused := func() int64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(t.Context(), &rm))
		var n int64
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "redfence.lock.contention" {
					for _, dp := range s.DataPoints {
						n += dp.Value
					}
				}
			}
		}
		return n
	}
	// take holds the key; wait returns once another acquisition of it
	// (started in the background) holds it too, or fails.
	check := func(t *testing.T, take func(context.Context) (func(context.Context) error, error)) {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		release, err := take(ctx)
		require.NoError(t, err)
		before := refused()
		got := make(chan error, 1)
		go func() {
			again, err := take(ctx)
			if err == nil {
				err = again(ctx)
			}
			got <- err
		}()
		require.Eventually(t, func() bool { return refused() >= before+2 }, 10*time.Second, time.Millisecond)
		assert.Equal(t, before+2, refused(), "the waiter asked more than twice before it parked")
		require.NoError(t, release(ctx))
		require.NoError(t, <-got, "the waiter was not woken by its own Locker's release")
	}
	t.Run("semaphore", func(t *testing.T) {
		s, err := mutex.NewSemaphore(l, "local-sem", 1, long...)
		require.NoError(t, err)
		check(t, func(ctx context.Context) (func(context.Context) error, error) {
			p, err := s.Acquire(ctx)
			if err != nil {
				return nil, err
			}
			return p.Release, nil
		})
	})
	t.Run("rwmutex", func(t *testing.T) {
		rw, err := mutex.NewRWMutex(l, "local-rw", long...)
		require.NoError(t, err)
		check(t, func(ctx context.Context) (func(context.Context) error, error) {
			h, err := rw.Lock(ctx)
			if err != nil {
				return nil, err
			}
			return h.Release, nil
		})
	})
}
