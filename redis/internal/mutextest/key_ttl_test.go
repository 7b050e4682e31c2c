package mutextest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
)

// A short-lease permit's grant never shortens the semaphore keys' TTL
// below a long-lease holder's remaining lease: keys expired under a live
// holder would make every permit look free, and more than N live.
func TestSemaphoreMixedLeasesKeyExpiry(t *testing.T) {
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

// The read-write lock's and the semaphore's keys carry a TTL and expire
// the fence TTL past their last use: no hash or sorted set outlives the
// use of its name.
func TestRWAndSemaphoreKeysExpireAfterLastUse(t *testing.T) {
	c, _ := redistest.Redis(t)
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
