package redisdriver_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/clusterslot"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redisdriver"
)

// redisKey is the Redis key of k, under the driver's prefix.
func redisKey(k string) string { return redisproto.LockKey(prefix, k) }

// sameSlot returns n keys of the test, named name and a number, whose
// Redis keys share a hash slot.
func sameSlot(t *testing.T, name string, n int) []string {
	bySlot := map[int][]string{}
	for i := 0; ; i++ {
		k := key(t, name+strconv.Itoa(i))
		s := clusterslot.Of(redisKey(k))
		if bySlot[s] = append(bySlot[s], k); len(bySlot[s]) == n {
			return bySlot[s]
		}
	}
}

func attempts(keys []string, owner string, shared bool) []backend.Attempt {
	as := make([]backend.Attempt, len(keys))
	for i, k := range keys {
		as[i] = backend.Attempt{Key: k, Owner: owner, TTL: 10 * time.Second, Shared: shared}
	}
	return as
}

// keyState is a key's raw value (nil when absent) and TTL in Redis.
type keyState struct {
	value *string
	pttl  time.Duration
}

func stateOf(t *testing.T, c redis.UniversalClient, k string) keyState {
	ctx := context.Background()
	var st keyState
	v, err := c.Get(ctx, redisKey(k)).Result()
	if err != redis.Nil {
		require.NoError(t, err)
		st.value = &v
	}
	st.pttl, err = c.PTTL(ctx, redisKey(k)).Result()
	require.NoError(t, err)
	return st
}

func TestAcquireAll(t *testing.T) {
	for name, client := range map[string]func(t *testing.T) redis.UniversalClient{
		"standalone": func(t *testing.T) redis.UniversalClient { c, _ := redistest.Redis(t); return c },
		"cluster":    func(t *testing.T) redis.UniversalClient { return redistest.RedisCluster(t, 3).Client },
	} {
		t.Run(name, func(t *testing.T) {
			c := client(t)
			d := newDriver(t, c)
			testAcquireAllBusy(t, c, d)
			testAcquireAllTakesEach(t, c, d)
			testAcquireAllReenters(t, d)
		})
	}
}

// A key held by another owner: nothing changes, each key keeps its value
// and its TTL (a released key, a held one, an absent one), and busy names
// the held key.
func testAcquireAllBusy(t *testing.T, c redis.UniversalClient, d *redisdriver.Driver) {
	ctx := context.Background()
	keys := sameSlot(t, "busy", 3)
	free := acquire(t, d, keys[0], "earlier", time.Second)
	_, err := d.Release(ctx, free)
	require.NoError(t, err)
	acquire(t, d, keys[1], "x", 10*time.Second)
	// TTLs no acquisition would set: undone, they cannot have been reset.
	require.NoError(t, c.PExpire(ctx, redisKey(keys[0]), 500*time.Second).Err())
	require.NoError(t, c.PExpire(ctx, redisKey(keys[1]), 400*time.Second).Err())
	before := []keyState{stateOf(t, c, keys[0]), stateOf(t, c, keys[1]), stateOf(t, c, keys[2])}

	grants, busy, err := d.AcquireAll(ctx, attempts(keys, "batch", false))
	require.NoError(t, err)
	assert.Nil(t, grants)
	assert.Equal(t, 1, busy)
	for i, k := range keys {
		after := stateOf(t, c, k)
		assert.Equal(t, before[i].value, after.value, "key %d's value", i)
		assert.LessOrEqual(t, after.pttl, before[i].pttl, "key %d's TTL was put back", i)
	}
	assert.Nil(t, before[2].value, "the third key never existed")
	assert.Greater(t, before[1].pttl, 300*time.Second)
}

// Every key free: each taken as a single Acquire takes it (a token above
// the key's earlier ones, the same value), and each releases on its own.
func testAcquireAllTakesEach(t *testing.T, c redis.UniversalClient, d *redisdriver.Driver) {
	ctx := context.Background()
	keys := sameSlot(t, "each", 3)
	earlier := make([]int64, len(keys))
	for i, k := range keys {
		l := acquire(t, d, k, "earlier", time.Second)
		earlier[i] = l.Token
		_, err := d.Release(ctx, l)
		require.NoError(t, err)
	}
	grants, busy, err := d.AcquireAll(ctx, attempts(keys, "batch", false))
	require.NoError(t, err)
	require.Equal(t, -1, busy)
	require.Len(t, grants, len(keys))
	for i, g := range grants {
		assert.Equal(t, backend.Acquired, g.Status)
		assert.Greater(t, g.Token, earlier[i])
		v := value(t, c, keys[i])
		assert.Equal(t, redisproto.Value{Token: g.Token, Count: 1, From: v.From, Lease: 10 * time.Second,
			Owner: "batch", Issued: v.Issued}, v, "the value a single Acquire writes")
		_, err := d.Acquire(ctx, backend.Attempt{Key: keys[i], Owner: "other", TTL: time.Second})
		require.NoError(t, err)
		left, err := d.Release(ctx, backend.Lease{Key: keys[i], Owner: "batch", Token: g.Token, Handle: g.Handle})
		require.NoError(t, err)
		assert.EqualValues(t, 0, left)
	}
}

// A WithOwner attempt re-enters the keys its owner holds, with their
// tokens, and takes the others.
func testAcquireAllReenters(t *testing.T, d *redisdriver.Driver) {
	ctx := context.Background()
	keys := sameSlot(t, "reenter", 2)
	held := acquire(t, d, keys[0], "job-7", 10*time.Second)
	grants, busy, err := d.AcquireAll(ctx, attempts(keys, "job-7", true))
	require.NoError(t, err)
	require.Equal(t, -1, busy)
	assert.Equal(t, backend.Reentered, grants[0].Status)
	assert.Equal(t, held.Token, grants[0].Token)
	assert.Equal(t, backend.Acquired, grants[1].Status)
	left, err := d.Release(ctx, held)
	require.NoError(t, err)
	assert.EqualValues(t, 1, left, "the re-entry's count is left")
}

// Group is 0 for a single deployment, and the Redis key's slot on Cluster.
func TestGroup(t *testing.T) {
	c, _ := redistest.Redis(t)
	d := newDriver(t, c)
	cl := redistest.RedisCluster(t, 3)
	dc := newDriver(t, cl.Client)
	for _, k := range []string{"a", "b", "account:42", "x{y}z"} {
		assert.Zero(t, d.Group(k))
		want, err := cl.Client.ClusterKeySlot(context.Background(), redisKey(k)).Result()
		require.NoError(t, err)
		assert.EqualValues(t, want, dc.Group(k), "slot of %q", k)
	}
}

// Attempts that one script cannot take are refused before Redis is asked.
func TestAcquireAllBadInput(t *testing.T) {
	cl := redistest.RedisCluster(t, 3)
	d := newDriver(t, cl.Client)
	ks := sameSlot(t, "bad", 2)
	other := key(t, "x")
	for ; clusterslot.Of(redisKey(other)) == clusterslot.Of(redisKey(ks[0])); other += "x" {
	}
	mixed := attempts(ks, "a", false)
	mixed[1].Owner = "b"
	waiter := attempts(ks, "a", false)
	waiter[0].Waiter = "locker"
	cases := map[string][]backend.Attempt{
		"none":         nil,
		"two owners":   mixed,
		"a waiter":     waiter,
		"two slots":    attempts([]string{ks[0], other}, "a", false),
		"an empty key": attempts([]string{""}, "a", false),
	}
	for name, as := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := d.AcquireAll(context.Background(), as)
			assert.ErrorIs(t, err, backend.ErrInvalid)
		})
	}
}

// An AcquireAll given up on is waited for by Abandon of its owner, which
// then frees every key the late call took.
func TestAbandonAfterAcquireAll(t *testing.T) {
	c, srv := redistest.Redis(t)
	loadScripts(t, c)
	require.NoError(t, redisproto.AcquireAllScript.Load(context.Background(), c).Err())
	proxy := testutil.Proxy(t, srv.Addr())
	pc, _ := plainClient(t, proxy.Addr(), 5*time.Second)
	d := newDriver(t, pc)
	require.NoError(t, pc.Ping(context.Background()).Err())
	keys := []string{key(t, "a"), key(t, "b")}
	proxy.SetLatency(150 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, _, err := d.AcquireAll(ctx, attempts(keys, "random-3", false))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	for _, k := range keys {
		require.NoError(t, d.Abandon(context.Background(), k, "random-3"))
	}
	proxy.Heal()
	for _, k := range keys {
		v := value(t, c, k)
		assert.True(t, v.Released, "the late grant of %s was freed: %+v", k, v)
	}
}
