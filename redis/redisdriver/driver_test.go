package redisdriver_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redisdriver"
)

// A nil client or a bad option is an error matching mutex.ErrInvalid from
// New, with no server asked and no panic.
func TestNewBadInput(t *testing.T) {
	c, calls := redistest.DeadClient(t)
	for name, tc := range map[string]struct {
		c    redis.UniversalClient
		opts []redisdriver.Option
	}{
		"nil client":         {nil, nil},
		"nil *redis.Client":  {(*redis.Client)(nil), nil},
		"nil *ClusterClient": {(*redis.ClusterClient)(nil), nil},
		"fence TTL below 1s": {c, []redisdriver.Option{redisdriver.WithFenceTTL(500 * time.Millisecond)}},
		"negative fence TTL": {c, []redisdriver.Option{redisdriver.WithFenceTTL(-time.Hour)}},
		"brace prefix":       {c, []redisdriver.Option{redisdriver.WithPrefix("a{b")}},
		"closing brace":      {c, []redisdriver.Option{redisdriver.WithPrefix("a}")}},
		"bad after good":     {c, []redisdriver.Option{redisdriver.WithPrefix("ok:"), redisdriver.WithFenceTTL(0)}},
	} {
		t.Run(name, func(t *testing.T) {
			var d *redisdriver.Driver
			err := testutil.Safely(t, time.Second, func() (err error) {
				d, err = redisdriver.New(tc.c, tc.opts...)
				return err
			})
			require.ErrorIs(t, err, mutex.ErrInvalid)
			assert.ErrorContains(t, err, "redisdriver: ")
			assert.Nil(t, d)
		})
	}
	assert.Zero(t, calls.N(), "no server request")

	d, err := redisdriver.New(c, nil, redisdriver.WithPrefix("ok:"), nil)
	require.NoError(t, err, "nil options are ignored")
	require.NoError(t, d.Close())
}

// An empty key is bad input, refused before any server is asked.
func TestEmptyKey(t *testing.T) {
	c, calls := redistest.DeadClient(t)
	d := newDriver(t, c)
	ctx := context.Background()
	l := backend.Lease{Key: "", Owner: "o", Token: 1, TTL: time.Second}
	_, err := d.Acquire(ctx, backend.Attempt{Key: "", Owner: "o", TTL: time.Second})
	assert.ErrorIs(t, err, backend.ErrInvalid)
	_, err = d.Release(ctx, l)
	assert.ErrorIs(t, err, backend.ErrInvalid)
	_, err = d.Extend(ctx, []backend.Lease{l})
	assert.ErrorIs(t, err, backend.ErrInvalid)
	_, err = d.TTL(ctx, l)
	assert.ErrorIs(t, err, backend.ErrInvalid)
	assert.ErrorIs(t, d.Abandon(ctx, "", "o"), backend.ErrInvalid)
	assert.ErrorIs(t, d.Leave(ctx, "", "w"), backend.ErrInvalid)
	_, _, err = d.HandOff(ctx, l, backend.Attempt{Key: "", Owner: "p", TTL: time.Second})
	assert.ErrorIs(t, err, backend.ErrInvalid)
	_, err = d.AckReplicas(ctx, l, 1, time.Second)
	assert.ErrorIs(t, err, backend.ErrInvalid)
	assert.ErrorIs(t, d.ReleaseAll(ctx, []backend.Lease{l}), backend.ErrInvalid)
	ready, stop := d.Watch("", func() {})
	require.NotNil(t, ready, "nothing will be reported: the Locker polls")
	stop()
	assert.Zero(t, calls.N(), "no server request")
}

// The contract's core methods on both deployments: acquire, re-enter, held
// with the remaining lease, release counts down and then -1, extend and TTL.
func TestContract(t *testing.T) {
	c, _ := redistest.Redis(t)
	cl := redistest.RedisCluster(t, 3)
	for name, client := range map[string]redis.UniversalClient{"standalone": c, "cluster": cl.Client} {
		t.Run(name, func(t *testing.T) {
			d := newDriver(t, client)
			t.Run("acquire", func(t *testing.T) { testAcquire(t, d) })
			t.Run("release", func(t *testing.T) { testRelease(t, d) })
			t.Run("extend", func(t *testing.T) { testExtend(t, d) })
			t.Run("handoff", func(t *testing.T) { testHandOff(t, d) })
			t.Run("watch", func(t *testing.T) { testWatch(t, d) })
		})
	}
}

func testAcquire(t *testing.T, d *redisdriver.Driver) {
	ctx := context.Background()
	k := key(t, "k")
	l := acquire(t, d, k, "a", 10*time.Second)

	g, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "a", TTL: 10 * time.Second, Shared: true})
	require.NoError(t, err)
	assert.Equal(t, backend.Reentered, g.Status)
	assert.Equal(t, l.Token, g.Token)
	assert.NotNil(t, g.Handle)

	g, err = d.Acquire(ctx, backend.Attempt{Key: k, Owner: "b", TTL: time.Second})
	require.NoError(t, err)
	assert.Equal(t, backend.Held, g.Status)
	assert.Zero(t, g.Token)
	assert.Positive(t, g.Remaining)
	assert.LessOrEqual(t, g.Remaining, 10*time.Second)
	assert.Nil(t, g.Handle)

	left, err := d.Release(ctx, l)
	require.NoError(t, err)
	assert.EqualValues(t, 1, left)
	left, err = d.Release(ctx, l)
	require.NoError(t, err)
	assert.EqualValues(t, 0, left)

	l2 := acquire(t, d, k, "b", time.Second)
	assert.Greater(t, l2.Token, l.Token, "tokens increase")
}

func testRelease(t *testing.T, d *redisdriver.Driver) {
	ctx := context.Background()
	k := key(t, "k")
	l := acquire(t, d, k, "a", 10*time.Second)
	wrong := l
	wrong.Token++
	wrong.Handle = nil // the handle carries the token it was granted
	left, err := d.Release(ctx, wrong)
	require.NoError(t, err)
	assert.EqualValues(t, -1, left, "another token holds nothing")
	left, err = d.Release(ctx, l)
	require.NoError(t, err)
	assert.EqualValues(t, 0, left)
	left, err = d.Release(ctx, l)
	require.NoError(t, err)
	assert.EqualValues(t, -1, left, "released already")

	// A Lease without its handle still works: keys and token from the lease.
	l = acquire(t, d, k, "a", 10*time.Second)
	l.Handle = nil
	ttl, err := d.TTL(ctx, l)
	require.NoError(t, err)
	assert.Positive(t, ttl)
	res, err := d.Extend(ctx, []backend.Lease{l})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Renewed}, res)
	left, err = d.Release(ctx, l)
	require.NoError(t, err)
	assert.EqualValues(t, 0, left)

	// ReleaseAll: one count of each, in one step.
	l1, l2 := acquire(t, d, key(t, "1"), "a", 10*time.Second), acquire(t, d, key(t, "2"), "a", 10*time.Second)
	require.NoError(t, d.ReleaseAll(context.Background(), []backend.Lease{l1, l2}))
	for _, l := range []backend.Lease{l1, l2} {
		left, err := d.Release(ctx, l)
		require.NoError(t, err)
		assert.EqualValues(t, -1, left, "ReleaseAll released it")
	}
	require.NoError(t, d.ReleaseAll(ctx, nil))
}

func testExtend(t *testing.T, d *redisdriver.Driver) {
	ctx := context.Background()
	l := acquire(t, d, key(t, "k"), "a", time.Second)
	gone := acquire(t, d, key(t, "gone"), "a", time.Second)
	left, err := d.Release(ctx, gone)
	require.NoError(t, err)
	require.EqualValues(t, 0, left)

	l.TTL, gone.TTL = 30*time.Second, 30*time.Second
	res, err := d.Extend(ctx, []backend.Lease{l, gone})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Renewed, backend.Gone}, res)
	ttl, err := d.TTL(ctx, l)
	require.NoError(t, err)
	assert.Greater(t, ttl, 20*time.Second, "extended to 30s")
	assert.LessOrEqual(t, ttl, 30*time.Second)
	ttl, err = d.TTL(ctx, gone)
	require.NoError(t, err)
	assert.Negative(t, ttl)

	res, err = d.Extend(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, res)
}

// The key the driver writes is the one package mutex wrote: the wire format
// does not change with the move.
func TestWireKey(t *testing.T) {
	c, _ := redistest.Redis(t)
	d := newDriver(t, c)
	ctx := context.Background()
	for _, user := range []string{"plain", "with{braces}", "a:b/c"} {
		l := acquire(t, d, user, "owner-1", 10*time.Second)
		want := redisproto.LockKey(prefix, user)
		keys, err := c.Keys(ctx, want).Result()
		require.NoError(t, err)
		require.Equal(t, []string{want}, keys, "the lock key of %q", user)
		s, err := c.Get(ctx, want).Result()
		require.NoError(t, err)
		v, ok := redisproto.ParseValue(s)
		require.True(t, ok)
		assert.Equal(t, "owner-1", v.Owner)
		assert.Equal(t, l.Token, v.Token)
		assert.Equal(t, 1, v.Count)
		assert.Equal(t, 10*time.Second, v.Lease)
		left, err := d.Release(ctx, l)
		require.NoError(t, err)
		require.EqualValues(t, 0, left)
	}
	assert.Equal(t, "rf:{plain}", redisproto.LockKey(prefix, "plain"), "the shape the old core wrote")
}

// Every call returns by its context's deadline, on a client that does not
// apply deadlines to its sockets, against a server that never answers.
func TestDeadlineOnHungServer(t *testing.T) {
	addr := testutil.SilentServer(t)
	c, _ := plainClient(t, addr, time.Second)
	d := newDriver(t, c)
	k := "k"
	l := backend.Lease{Key: k, Owner: "o", Token: 1, TTL: time.Second}
	for name, call := range map[string]func(context.Context) error{
		"acquire": func(ctx context.Context) error {
			_, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "o", TTL: time.Second})
			return err
		},
		"release": func(ctx context.Context) error { _, err := d.Release(ctx, l); return err },
		"extend":  func(ctx context.Context) error { _, err := d.Extend(ctx, []backend.Lease{l}); return err },
		"ttl":     func(ctx context.Context) error { _, err := d.TTL(ctx, l); return err },
		"leave":   func(ctx context.Context) error { return d.Leave(ctx, k, "w") },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
			defer cancel()
			err := testutil.Safely(t, 2*time.Second, func() error { return call(ctx) })
			assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
		})
	}
	_ = c.Close() // ends the calls still out, so that Close need not wait the ReadTimeout
	require.NoError(t, d.Close())
}

// The defaults: the prefix "redfence:", a fence counter that lives an
// hour; the client is lent as it was given (ClientHolder, ClientOf).
func TestDefaultsAndClient(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	d := newDriver(t, c)
	assert.Same(t, c, d.Client())
	assert.Same(t, c, redisdriver.ClientOf(d))
	var nilDriver *redisdriver.Driver
	assert.Nil(t, redisdriver.ClientOf(nilDriver), "a nil Driver lends nothing")
	assert.Nil(t, redisdriver.ClientOf(nil))

	def, err := redisdriver.New(c)
	require.NoError(t, err)
	defer def.Close()
	k := key(t, "k")
	l := acquire(t, def, k, "a", time.Second)
	pttl, err := c.PTTL(ctx, redisproto.LockKey("redfence:", k)).Result()
	require.NoError(t, err, "the default prefix is redfence:")
	assert.Greater(t, pttl, 50*time.Minute, "the fence counter lives an hour by default")
	assert.LessOrEqual(t, pttl, time.Hour)
	_, err = def.Release(ctx, l)
	require.NoError(t, err)

	// A fence TTL other than the default is sent and kept.
	d2, err := redisdriver.New(c, redisdriver.WithPrefix(prefix), redisdriver.WithFenceTTL(2*time.Hour))
	require.NoError(t, err)
	defer d2.Close()
	l = acquire(t, d2, k, "a", time.Second)
	pttl, err = c.PTTL(ctx, redisproto.LockKey(prefix, k)).Result()
	require.NoError(t, err)
	assert.Greater(t, pttl, time.Hour+50*time.Minute)
	_, err = d2.Release(ctx, l)
	require.NoError(t, err)
}
