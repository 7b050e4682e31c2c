package redlockdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex/backend"
)

// TestExtendAndTTL: Extend renews on a majority, tells a lease that is not
// the holder's as Gone, and one without a majority as Unknown with an
// outage; TTL is the lease a majority still guarantees.
func TestExtendAndTTL(t *testing.T) {
	clients, srvs := nodes(t, 5)
	d := newDriver(t, clients)
	ctx := context.Background()
	l := acquire(t, d, backend.Attempt{Key: "ext", Owner: owner(t), TTL: 2 * time.Second})
	other := acquire(t, d, backend.Attempt{Key: "ext2", Owner: owner(t), TTL: 2 * time.Second})

	ttl, err := d.TTL(ctx, l)
	require.NoError(t, err)
	assert.Greater(t, ttl, time.Second)
	assert.LessOrEqual(t, ttl, 2*time.Second)

	stale := l
	stale.Token--
	l.TTL, other.TTL, stale.TTL = time.Minute, time.Minute, time.Minute
	got, err := d.Extend(ctx, []backend.Lease{l, stale, other})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Renewed, backend.Gone, backend.Renewed}, got)
	ttl, err = d.TTL(ctx, l)
	require.NoError(t, err)
	assert.Greater(t, ttl, 50*time.Second)
	ttl, err = d.TTL(ctx, stale)
	require.NoError(t, err)
	assert.Negative(t, ttl, "not the holder's")

	for _, s := range srvs[:3] {
		s.Kill()
	}
	got, err = d.Extend(ctx, []backend.Lease{l})
	assert.Equal(t, []backend.Renewal{backend.Unknown}, got)
	assert.ErrorIs(t, err, backend.ErrUnavailable)
	assert.ErrorContains(t, err, "mutex: store unavailable: mutex: Redlock: no majority of nodes confirmed: node 0 ("+d.Addrs()[0]+"): ")
	_, err = d.TTL(ctx, l)
	assert.ErrorIs(t, err, backend.ErrUnavailable, "cannot tell")
	_, err = d.Release(ctx, l)
	require.NoError(t, err, "two nodes confirm the release")
}

// TestAbandon frees what an owner holds, whatever the count, on every
// node; with a node down it says so (ErrUnavailable).
func TestAbandon(t *testing.T) {
	clients, srvs := nodes(t, 3)
	d := newDriver(t, clients)
	ctx := context.Background()
	key, a := "ab", "job"
	acquire(t, d, backend.Attempt{Key: key, Owner: a, TTL: time.Minute, Shared: true})
	acquire(t, d, backend.Attempt{Key: key, Owner: a, TTL: time.Minute, Shared: true})
	require.NoError(t, d.Abandon(ctx, key, "someone else"))
	for _, c := range clients {
		assert.Equal(t, a, holder(t, c, key), "another owner's abandon changes nothing")
	}
	require.NoError(t, d.Abandon(ctx, key, a))
	for _, c := range clients {
		assert.Empty(t, holder(t, c, key), "freed, whatever the count")
	}
	b := acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Minute})

	srvs[0].Kill()
	err := d.Abandon(ctx, key, b.Owner)
	assert.ErrorIs(t, err, backend.ErrUnavailable)
	assert.ErrorContains(t, err, "node 0 ("+d.Addrs()[0]+")")
	for _, c := range clients[1:] {
		assert.Empty(t, holder(t, c, key))
	}
}
