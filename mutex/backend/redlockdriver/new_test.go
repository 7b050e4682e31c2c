package redlockdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/mutex/backend/redlockdriver"
)

func TestNewRefusesBadInput(t *testing.T) {
	a, _ := testutil.DeadClient(t)
	b, _ := testutil.DeadClient(t)
	c, _ := testutil.DeadClient(t)
	twin := redis.NewClient(&redis.Options{Addr: a.Options().Addr})
	t.Cleanup(func() { _ = twin.Close() })
	cluster := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{testutil.RefusedAddr(t)}})
	t.Cleanup(func() { _ = cluster.Close() })
	var typedNil *redis.Client
	for _, tc := range []struct {
		name    string
		clients []redis.UniversalClient
		cfg     redlockdriver.Config
		msg     string
	}{
		{"none", nil, redlockdriver.Config{}, "Redlock needs at least 3 independent masters, got 0"},
		{"two", []redis.UniversalClient{a, b}, redlockdriver.Config{}, "Redlock needs at least 3 independent masters, got 2"},
		{"nil", []redis.UniversalClient{a, nil, c}, redlockdriver.Config{}, "Redlock node 1 is nil"},
		{"typed nil", []redis.UniversalClient{a, b, typedNil}, redlockdriver.Config{}, "Redlock node 2 is nil"},
		{"same client", []redis.UniversalClient{a, b, a}, redlockdriver.Config{}, "Redlock nodes 0 and 2 are the same client: each node must be its own master"},
		{"same address", []redis.UniversalClient{a, b, twin}, redlockdriver.Config{}, "Redlock nodes 0 and 2 both reach " + a.Options().Addr + ": each node must be its own master"},
		{"cluster", []redis.UniversalClient{a, cluster, c}, redlockdriver.Config{}, "Redlock node 1 is a Cluster client: Redlock needs independent masters"},
		{"fence TTL", []redis.UniversalClient{a, b, c}, redlockdriver.Config{FenceTTL: time.Millisecond}, "fence TTL 1ms is below 1s"},
		{"node timeout", []redis.UniversalClient{a, b, c}, redlockdriver.Config{NodeTimeout: -time.Second}, "node timeout -1s must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := redlockdriver.New(tc.clients, tc.cfg)
			require.ErrorIs(t, err, backend.ErrInvalid)
			assert.Nil(t, d)
			assert.Equal(t, "mutex: invalid argument: "+tc.msg, err.Error())
		})
	}
}

func TestAddrsAndQuorum(t *testing.T) {
	for _, n := range []int{3, 4, 5} {
		clients := make([]redis.UniversalClient, n)
		want := make([]string, n)
		for i := range clients {
			c, _ := testutil.DeadClient(t)
			clients[i], want[i] = c, c.Options().Addr
		}
		d, err := redlockdriver.New(clients, redlockdriver.Config{})
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
	calls := make([]*testutil.Calls, 3)
	for i := range clients {
		clients[i], calls[i] = testutil.DeadClient(t)
	}
	d := newDriver(t, clients, redlockdriver.Config{})
	ctx := context.Background()
	var nilCtx context.Context
	good := backend.Attempt{Key: prefix + "k", Owner: "o", TTL: time.Second}
	lease := backend.Lease{Key: prefix + "k", Owner: "o", Token: 1, TTL: time.Second}
	with := func(f func(*backend.Attempt)) backend.Attempt { a := good; f(&a); return a }
	leased := func(f func(*backend.Lease)) backend.Lease { l := lease; f(&l); return l }
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"acquire nil ctx", func() error { _, err := d.Acquire(nilCtx, good); return err }},
		{"acquire unprefixed key", func() error { _, err := d.Acquire(ctx, with(func(a *backend.Attempt) { a.Key = "k" })); return err }},
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
		{"abandon unprefixed key", func() error { return d.Abandon(ctx, "k", "o") }},
		{"abandon empty owner", func() error { return d.Abandon(ctx, prefix+"k", "") }},
		{"release all zero token", func() error {
			return d.ReleaseAll(ctx, []backend.Lease{leased(func(l *backend.Lease) { l.Token = 0 })})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := testutil.Safely(t, 5*time.Second, tc.call)
			assert.ErrorIs(t, err, backend.ErrInvalid)
		})
	}
	ready, stop := d.Watch("k", nil)
	select {
	case <-ready:
		t.Error("a watch of an unprefixed key is ready")
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
