package redisdriver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// The uncontended Acquire+Release allocates at most one more than the same
// go-redis calls made by hand as package mutex made them (lock key, queue
// key, script arguments, release value): the grant's handle.
func TestUncontendedAllocs(t *testing.T) {
	c, _ := redistest.Redis(t)
	d := newDriver(t, c)
	ctx := context.Background()
	k := "allocs"
	ttl := 10 * time.Second
	loadScripts(t, c)

	viaDriver := testing.AllocsPerRun(200, func() {
		g, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "owner", TTL: ttl})
		if err != nil || g.Status != backend.Acquired {
			t.Fatal(g, err)
		}
		if n, err := d.Release(ctx, backend.Lease{Key: k, Owner: "owner", Token: g.Token, Handle: g.Handle}); n != 0 || err != nil {
			t.Fatal(n, err)
		}
	})
	byHand := testing.AllocsPerRun(200, func() { oldCycle(t, ctx, c, k, ttl) })
	t.Logf("allocations per Acquire+Release: driver %v, by hand %v", viaDriver, byHand)
	assert.LessOrEqual(t, viaDriver, byHand+1)
}

// oldCycle is what package mutex sent for an uncontended Lock+Unlock on a
// standalone server, allocation for allocation.
func oldCycle(t *testing.T, ctx context.Context, c redis.UniversalClient, user string, ttl time.Duration) {
	lockKey := redisproto.LockKey(prefix, user)
	keys := []string{lockKey}
	args := make([]any, 0, 6)
	args = append(args, "owner", ttl.Milliseconds())
	reply, err := redisproto.AcquireScript.Run(ctx, c, keys, args...).Result()
	require.NoError(t, err)
	n, tokenStr, err := redisproto.ParseAcquire(reply)
	require.NoError(t, err)
	if tokenStr == "" {
		tokenStr = strconv.FormatInt(n[1], 10)
	}
	relKeys := [2]string{lockKey, redisproto.QueueOf(lockKey)}
	v := redisproto.ReleaseValue("owner", tokenStr, ttl)
	left, err := redisproto.ReleaseScript.Run(ctx, c, relKeys[:], []any{v, tokenStr}...).Int64()
	require.NoError(t, err)
	require.Zero(t, left)
}
