package redlockdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redlockdriver"
)

func TestNewRefusesBadInput(t *testing.T) {
	a, ca := redistest.DeadClient(t)
	b, cb := redistest.DeadClient(t)
	c, cc := redistest.DeadClient(t)
	twin := redis.NewClient(&redis.Options{Addr: a.Options().Addr})
	t.Cleanup(func() { _ = twin.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{testutil.RefusedAddr(t)}})
	t.Cleanup(func() { _ = cluster.Close() })
	var typedNil *redis.Client
	three := []redis.UniversalClient{a, b, c}
	for _, tc := range []struct {
		name    string
		clients []redis.UniversalClient
		opts    []redlockdriver.Option
		msg     string
	}{
		{"none", nil, nil, "Redlock needs at least 3 independent masters, got 0"},
		{"two", []redis.UniversalClient{a, b}, nil, "Redlock needs at least 3 independent masters, got 2"},
		{"nil", []redis.UniversalClient{a, nil, c}, nil, "Redlock node 1 is nil"},
		{"typed nil", []redis.UniversalClient{a, b, typedNil}, nil, "Redlock node 2 is nil"},
		{"same client", []redis.UniversalClient{a, b, a}, nil, "Redlock nodes 0 and 2 are the same client: each node must be its own master"},
		{"same address", []redis.UniversalClient{a, b, twin}, nil, "Redlock nodes 0 and 2 both reach " + a.Options().Addr + ": each node must be its own master"},
		{"cluster", []redis.UniversalClient{a, cluster, c}, nil, "Redlock node 1 is a Cluster client: Redlock needs independent masters"},
		{"fence TTL", three, []redlockdriver.Option{redlockdriver.WithFenceTTL(time.Millisecond)}, "fence TTL 1ms is below 1s"},
		{"store timeout", three, []redlockdriver.Option{redlockdriver.WithStoreTimeout(-time.Second)}, "store timeout -1s must be positive"},
		{"zero store timeout", three, []redlockdriver.Option{redlockdriver.WithStoreTimeout(0)}, "store timeout 0s must be positive"},
		{"brace prefix", three, []redlockdriver.Option{redlockdriver.WithPrefix("a{b")}, `prefix "a{b" contains a brace`},
		{"nil clock", three, []redlockdriver.Option{redlockdriver.WithClock(nil)}, "nil clock"},
		{"first bad option", three, []redlockdriver.Option{redlockdriver.WithFenceTTL(0), redlockdriver.WithClock(nil)}, "fence TTL 0s is below 1s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var d *redlockdriver.Driver
			err := testutil.Safely(t, time.Second, func() (err error) {
				d, err = redlockdriver.New(tc.clients, tc.opts...)
				return err
			})
			require.ErrorIs(t, err, mutex.ErrInvalid)
			assert.Nil(t, d)
			assert.Equal(t, "redlockdriver: invalid argument: "+tc.msg, err.Error())
		})
	}
	for i, cl := range []*redistest.Calls{ca, cb, cc} {
		assert.Zero(t, cl.N(), "node %d was asked", i)
	}
	d, err := redlockdriver.New(three, nil, redlockdriver.WithPrefix("ok:"), nil)
	require.NoError(t, err, "nil options are ignored")
	require.NoError(t, d.Close())
}

func TestAddrsAndQuorum(t *testing.T) {
	for _, n := range []int{3, 4, 5} {
		clients := make([]redis.UniversalClient, n)
		want := make([]string, n)
		for i := range clients {
			c, _ := redistest.DeadClient(t)
			clients[i], want[i] = c, c.Options().Addr
		}
		d, err := redlockdriver.New(clients)
		require.NoError(t, err)
		assert.Equal(t, want, d.Addrs())
		assert.Equal(t, n/2+1, d.Quorum())
		d.Addrs()[0] = "changed"
		assert.Equal(t, want, d.Addrs(), "Addrs returns a copy")
		require.NoError(t, d.Close())
		require.NoError(t, d.Close(), "Close twice")
	}
}

// TestBadInputAsksNoServer: every method refuses bad input with an error
// matching ErrInvalid, before any node is asked.
func TestBadInputAsksNoServer(t *testing.T) {
	clients := make([]redis.UniversalClient, 3)
	calls := make([]*redistest.Calls, 3)
	for i := range clients {
		clients[i], calls[i] = redistest.DeadClient(t)
	}
	d := newDriver(t, clients)
	ctx := context.Background()
	var nilCtx context.Context
	good := backend.Attempt{Key: "k", Owner: "o", TTL: time.Second}
	lease := backend.Lease{Key: "k", Owner: "o", Token: 1, TTL: time.Second}
	with := func(f func(*backend.Attempt)) backend.Attempt { a := good; f(&a); return a }
	leased := func(f func(*backend.Lease)) backend.Lease { l := lease; f(&l); return l }
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"acquire nil ctx", func() error { _, err := d.Acquire(nilCtx, good); return err }},
		{"acquire empty key", func() error { _, err := d.Acquire(ctx, with(func(a *backend.Attempt) { a.Key = "" })); return err }},
		{"acquire empty owner", func() error { _, err := d.Acquire(ctx, with(func(a *backend.Attempt) { a.Owner = "" })); return err }},
		{"acquire zero TTL", func() error { _, err := d.Acquire(ctx, with(func(a *backend.Attempt) { a.TTL = 0 })); return err }},
		{"release zero token", func() error { _, err := d.Release(ctx, leased(func(l *backend.Lease) { l.Token = 0 })); return err }},
		{"release empty owner", func() error { _, err := d.Release(ctx, leased(func(l *backend.Lease) { l.Owner = "" })); return err }},
		{"extend zero TTL", func() error {
			_, err := d.Extend(ctx, []backend.Lease{lease, leased(func(l *backend.Lease) { l.TTL = 0 })})
			return err
		}},
		{"extend nil ctx", func() error { _, err := d.Extend(nilCtx, []backend.Lease{lease}); return err }},
		{"ttl empty key", func() error { _, err := d.TTL(ctx, leased(func(l *backend.Lease) { l.Key = "" })); return err }},
		{"abandon empty key", func() error { return d.Abandon(ctx, "", "o") }},
		{"abandon empty owner", func() error { return d.Abandon(ctx, "k", "") }},
		{"release all zero token", func() error {
			return d.ReleaseAll(ctx, []backend.Lease{leased(func(l *backend.Lease) { l.Token = 0 })})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := testutil.Safely(t, 5*time.Second, tc.call)
			assert.ErrorIs(t, err, backend.ErrInvalid)
		})
	}
	ready, stop := d.Watch("", nil)
	select {
	case <-ready:
		t.Error("a watch of an empty key is ready")
	default:
	}
	stop()
	for i, c := range calls {
		assert.Zero(t, c.N(), "node %d was asked", i)
	}
	renewals, err := d.Extend(ctx, nil)
	assert.NoError(t, err)
	assert.Empty(t, renewals)
	assert.NoError(t, d.ReleaseAll(ctx, nil))
}
