package mutextest

import (
	"context"
	"strconv"
	"testing"

	"github.com/redfence/redfence/redis/internal/redisproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// On a Cluster a lock key and its release channel hash to one slot, whatever
// braces the key holds, and many keys spread over every master.
func TestClusterKeyChannelOneSlotAndSpread(t *testing.T) {
	cl := redistest.RedisCluster(t, 3)
	l := newLocker(t, cl.Client)
	ctx := context.Background()
	for _, key := range []string{"plain", "{tagged}", "a{b}c", "}x{", "{", "}", "{}", "x}y{z}"} {
		lk := redisproto.LockKey(redisproto.DefaultPrefix, key)
		ks, err := cl.Client.ClusterKeySlot(ctx, lk).Result()
		require.NoError(t, err)
		cs, err := cl.Client.ClusterKeySlot(ctx, redisproto.ChannelOf(lk)).Result()
		require.NoError(t, err)
		assert.Equal(t, ks, cs, "key %q: lock key %q and channel in different slots", key, lk)
		got, err := l.TryLock(ctx, key)
		require.NoError(t, err, "key %q", key)
		require.NoError(t, got.Release(ctx))
	}
	// Many keys land on every master.
	for i := range 60 {
		lk, err := l.TryLock(ctx, "spread-"+strconv.Itoa(i), mutex.WithAutoRenew(false))
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	}
	for _, m := range cl.Masters {
		n, err := m.Client().DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Positive(t, n, "master %s holds no lock keys", m.Addr())
	}
}
