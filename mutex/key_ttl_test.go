package mutex_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend/redisdriver"
)

// Review (issue 39): each grant and extension sets the semaphore keys' TTL
// from its own lease (max(fence TTL, 2 leases)), so a short-lease permit's
// grant shortens the TTL below a long-lease holder's remaining lease. Once
// the keys expire, every permit looks free while the long holder's context
// is still live: more than N live permits.
func TestReviewSemaphoreMixedLeasesKeyExpiry(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		l := newLocker(t, c, redisdriver.WithFenceTTL(time.Second))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		long := semaphore(t, l, "mixed", 2, mutex.WithTTL(30*time.Second))
		short := semaphore(t, l, "mixed", 2, mutex.WithTTL(100*time.Millisecond))
		a, err := long.Acquire(ctx)
		require.NoError(t, err)
		b, err := short.Acquire(ctx) // sets the keys' TTL to the fence TTL, 1s
		require.NoError(t, err)
		require.NoError(t, b.Release(ctx))
		end := time.Now().Add(5 * time.Second) // well inside a's lease and before its first renewal
		for time.Now().Before(end) && a.Context().Err() == nil {
			limit, _, err := long.Holders(ctx)
			require.NoError(t, err)
			if limit == 0 { // the keys expired: the backend forgot a's permit
				break
			}
			time.Sleep(20 * time.Millisecond) // polling the server, not synchronising goroutines
		}
		var held []*mutex.Permit
		for range 2 {
			if p, err := short.TryAcquire(ctx); err == nil {
				held = append(held, p)
			}
		}
		live := len(held)
		if a.Context().Err() == nil {
			live++
		}
		assert.LessOrEqual(t, live, 2, "live permits of a semaphore of 2 (a's context: %v)", context.Cause(a.Context()))
		for _, p := range held {
			_ = p.Release(ctx)
		}
		_ = a.Release(ctx)
	})
}
