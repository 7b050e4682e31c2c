package redisinspect_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisinspect"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// A held key on one deployment: its holder, token, count, lease, the time
// its token was issued, and the Lockers queued for it.
func TestInspectHeld(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}})
	before := time.Now()
	tok := acquire(t, ctx, c, "acct:1", "owner-A", time.Minute, "")
	acquire(t, ctx, c, "acct:1", "owner-A", time.Minute, "") // re-entered
	queue(t, ctx, c, "acct:1", "owner-B", "locker-B")

	st, err := in.Inspect(ctx, "acct:1")
	require.NoError(t, err)
	assert.Equal(t, "acct:1", st.Key, "the key as the caller names it")
	assert.Equal(t, name("acct:1"), st.Name)
	assert.Equal(t, "owner-A", st.Owner)
	assert.Equal(t, tok, st.Token)
	assert.Equal(t, 2, st.Count)
	assert.True(t, st.Waited, "a waiting attempt found it held")
	assert.Equal(t, time.UnixMicro(tok), st.AcquiredAt, "the token is the server time it was issued")
	assert.False(t, st.RenewedAt.Before(st.AcquiredAt))
	assert.InDelta(t, time.Minute, st.Lease, float64(5*time.Second))
	assert.WithinDuration(t, before, st.Now, 5*time.Second, "the server's clock")
	require.Len(t, st.Waiters, 1)
	assert.Equal(t, "locker-B", st.Waiters[0].ID)
	assert.False(t, st.Waiters[0].Since.IsZero())
	assert.Empty(t, st.Forced)
	assert.Empty(t, st.Nodes, "one deployment has no nodes to show")
}

// What a key's value says when nobody holds it, or it is kept for a
// waiter: values as the scripts write them.
func TestInspectStates(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}})
	now := time.Now()
	for _, tc := range []struct {
		name, value string
		owner       string
		token       int64
		count       int
		waiters     int // of the one queued
		acquired    bool
	}{
		{name: "never locked"},
		{name: "unreadable", value: "not a lock value", waiters: 1},
		{name: "released keeps its token, not its queue", value: "123", token: 123},
		{name: "lease ran out", value: micros(now.Add(-time.Hour)) + " 1 " + micros(now.Add(-time.Hour)) + "+1000 1 owner-A", token: now.Add(-time.Hour).UnixMicro(), waiters: 1},
		{name: "reserved for a waiter", value: "77 0 " + micros(now) + "+60000 1 locker-B", owner: "locker-B", token: 77, waiters: 1},
		{name: "floored token is no time", value: micros(now.Add(time.Hour)) + " 1 " + micros(now) + "+60000 0 owner-A", owner: "owner-A", token: now.Add(time.Hour).UnixMicro(), count: 1, waiters: 1},
		{name: "held", value: micros(now) + " 1 " + micros(now) + "+60000 0 owner-A", owner: "owner-A", token: now.UnixMicro(), count: 1, waiters: 1, acquired: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := "k:" + tc.name
			if tc.value != "" {
				require.NoError(t, c.Set(ctx, name(k), tc.value, time.Hour).Err())
			}
			require.NoError(t, c.ZAdd(ctx, redisproto.QueueOf(name(k)), redis.Z{Score: float64(now.UnixMicro()), Member: "locker-B"}).Err())
			st, err := in.Inspect(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, tc.owner, st.Owner)
			assert.Equal(t, tc.token, st.Token)
			assert.Equal(t, tc.count, st.Count)
			assert.Len(t, st.Waiters, tc.waiters)
			assert.Equal(t, tc.owner != "", st.Lease > 0, "lease %v", st.Lease)
			assert.Equal(t, tc.acquired, !st.AcquiredAt.IsZero(), "acquired at %v", st.AcquiredAt)
			assert.False(t, st.Now.IsZero())
		})
	}
}

// A Redlock key is the quorum's: held when a majority hold it for one
// owner and token, with each node's view beside it.
func TestInspectRedlockQuorum(t *testing.T) {
	clients, addrs, srvs := nodes(t, 3)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: clients, Addrs: addrs, Quorum: 2})
	p := proposal()
	for _, c := range clients {
		acquire(t, ctx, c, "batch", "owner-A", time.Minute, p)
	}
	st, err := in.Inspect(ctx, "batch")
	require.NoError(t, err)
	tok, _ := strconv.ParseInt(p, 10, 64)
	assert.Equal(t, "owner-A", st.Owner)
	assert.Equal(t, tok, st.Token, "every node took the proposal")
	assert.Equal(t, 1, st.Count)
	assert.Equal(t, time.UnixMicro(tok).Add(-100*time.Millisecond), st.AcquiredAt, "read from the proposal, by its client's clock")
	assert.Positive(t, st.Lease)
	require.Len(t, st.Nodes, 3)
	for i, n := range st.Nodes {
		assert.Equal(t, i, n.Node)
		assert.Equal(t, addrs[i], n.Addr)
		require.NoError(t, n.Err)
		assert.Equal(t, "owner-A", n.State.Owner)
		assert.Empty(t, n.State.Nodes)
	}

	// A lock on one node alone is nobody's; the highest token stays.
	solo := acquire(t, ctx, clients[0], "minority", "owner-M", time.Minute, "")
	st, err = in.Inspect(ctx, "minority")
	require.NoError(t, err)
	assert.Empty(t, st.Owner)
	assert.Equal(t, solo, st.Token)
	assert.Equal(t, "owner-M", st.Nodes[0].State.Owner)

	// Two holders, one node each, and the third answering free: free.
	acquire(t, ctx, clients[0], "split", "owner-A", time.Minute, "")
	acquire(t, ctx, clients[1], "split", "owner-B", time.Minute, "")
	st, err = in.Inspect(ctx, "split")
	require.NoError(t, err)
	assert.Empty(t, st.Owner)

	srvs[2].Kill()
	st, err = in.Inspect(ctx, "batch")
	require.NoError(t, err, "a majority answers")
	assert.Equal(t, "owner-A", st.Owner)
	assert.Error(t, st.Nodes[2].Err)
}

// A Redlock key that the answering nodes cannot call held or free, or
// that too few nodes answer for, is an outage, never a free key; the
// nodes' views are still there.
func TestInspectRedlockUndecidable(t *testing.T) {
	clients, addrs, srvs := nodes(t, 3)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: clients, Addrs: addrs, Quorum: 2})
	p := proposal()
	acquire(t, ctx, clients[0], "batch", "owner-A", time.Minute, p)
	acquire(t, ctx, clients[2], "batch", "owner-A", time.Minute, p)
	srvs[2].Kill()

	st, err := in.Inspect(ctx, "batch")
	assert.ErrorIs(t, err, backend.ErrUnavailable)
	assert.ErrorContains(t, err, `2 of 3 nodes answered, and they cannot tell whether a majority holds "batch"`)
	assert.ErrorContains(t, err, addrs[2])
	assert.Empty(t, st.Owner)
	require.Len(t, st.Nodes, 3)
	assert.Equal(t, "owner-A", st.Nodes[0].State.Owner)
	f, err := in.ForceRelease(ctx, "batch", backend.Force{Reason: "r"})
	assert.ErrorIs(t, err, backend.ErrUnavailable, "not 'nobody holds it'")
	assert.False(t, f.Released)

	srvs[1].Kill()
	_, err = in.Inspect(ctx, "batch")
	assert.ErrorIs(t, err, backend.ErrUnavailable)
	assert.ErrorContains(t, err, "1 of 3 nodes answered, 2 needed")
	srvs[0].Kill()
	st, err = in.Inspect(ctx, "batch")
	assert.ErrorIs(t, err, backend.ErrUnavailable)
	assert.ErrorContains(t, err, "0 of 3 nodes answered, 2 needed")
	assert.Len(t, st.Nodes, 3)
}

// Inspection reads with read-only scripts: a server whose writes are
// paused (CLIENT PAUSE WRITE, as during a failover) still answers, and one
// without EVALSHA_RO is read with EVALSHA.
func TestInspectReadOnly(t *testing.T) {
	ctx := testCtx(t)
	c, _ := redistest.Redis(t)
	acquire(t, ctx, c, "acct:1", "owner-A", time.Minute, "")
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}})
	_, err := in.Inspect(ctx, "acct:1") // the script is loaded before the pause
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err())
	st, err := in.Inspect(ctx, "acct:1")
	require.NoError(t, err)
	assert.Equal(t, "owner-A", st.Owner)
	require.NoError(t, c.Do(ctx, "CLIENT", "UNPAUSE").Err())

	old, _ := redistest.Redis(t, redistest.WithRedisArgs("--rename-command", "EVALSHA_RO", "EVALSHA_RO_hidden"))
	acquire(t, ctx, old, "acct:1", "owner-A", time.Minute, "")
	st, err = newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{old}}).Inspect(ctx, "acct:1")
	require.NoError(t, err, "EVALSHA when EVALSHA_RO is unknown")
	assert.Equal(t, "owner-A", st.Owner)
}

// A Cluster client that routes reads to replicas is inspected with EVALSHA,
// which goes to the key's master: a replica may not have the lock yet.
func TestInspectionReadsMasters(t *testing.T) {
	for _, o := range []redis.ClusterOptions{{ReadOnly: true}, {RouteByLatency: true}, {RouteRandomly: true}} {
		c := redis.NewClusterClient(&o)
		assert.True(t, redisproto.ReadsReplicas(c), "%+v", o)
		_ = c.Close()
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{})
	assert.False(t, redisproto.ReadsReplicas(c))
	_ = c.Close()
}
