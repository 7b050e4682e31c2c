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

// A forced release on one deployment ends the holder named by its token,
// leaves a token floor, wakes the key's watchers and leaves an audit entry
// that Inspect shows; another token or nobody changes nothing.
func TestForceRelease(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}})
	key := "acct:1"
	tok := acquire(t, ctx, c, "acct:1", "owner-A", time.Minute, "")
	acquire(t, ctx, c, "acct:1", "owner-A", time.Minute, "")

	f, err := in.ForceRelease(ctx, key, backend.Force{Token: tok + 1, By: "ops", Reason: "stuck"})
	require.NoError(t, err)
	assert.Equal(t, backend.Forced{Token: tok}, f, "held under another token: the holder's token, nothing changed")
	st, err := in.Inspect(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, "owner-A", st.Owner)

	sub := c.Subscribe(ctx, redisproto.ChannelOf(name("acct:1")))
	t.Cleanup(func() { _ = sub.Close() })
	_, err = sub.Receive(ctx) // subscribed
	require.NoError(t, err)
	f, err = in.ForceRelease(ctx, key, backend.Force{Token: tok, By: "ops", Reason: "stuck"})
	require.NoError(t, err)
	assert.Equal(t, backend.Forced{Released: true, Token: tok, Floor: tok + 1, Owner: "owner-A", Count: 2, Servers: 1}, f)
	_, err = sub.ReceiveMessage(ctx)
	require.NoError(t, err, "watchers are woken")
	assert.Equal(t, strconv.FormatInt(tok+1, 10), c.Get(ctx, name("acct:1")).Val(), "only the floor is left")
	next := acquire(t, ctx, c, "acct:1", "owner-B", time.Minute, "")
	assert.Greater(t, next, f.Floor)
	release(t, ctx, c, "acct:1", "owner-B", next)

	f, err = in.ForceRelease(ctx, key, backend.Force{By: "ops", Reason: "again"})
	require.NoError(t, err)
	assert.Equal(t, backend.Forced{}, f, "nobody holds it")

	st, err = in.Inspect(ctx, key)
	require.NoError(t, err)
	require.Len(t, st.Forced, 1)
	r := st.Forced[0]
	assert.NotEmpty(t, r.ID)
	assert.WithinDuration(t, time.Now(), r.At, 5*time.Second)
	assert.Equal(t, backend.ForceRecord{ID: r.ID, At: r.At, By: "ops", Reason: "stuck", Token: tok, Floor: tok + 1, Owner: "owner-A", Count: 2}, r)
	assert.Equal(t, "acct:1", c.XRange(ctx, redisproto.AuditOf(name("acct:1")), "-", "+").Val()[0].Values["key"], "the audit names the user key")
}

// On Redlock, a forced release of whoever holds the key ends the quorum's
// holder only, on the nodes that hold it for that holder; when a quorum of
// nodes does not answer, the holder may keep the lock: an outage.
func TestForceReleaseRedlock(t *testing.T) {
	clients, addrs, srvs := nodes(t, 3)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: clients, Addrs: addrs, Quorum: 2})
	key := "batch"
	p := proposal()
	tok, _ := strconv.ParseInt(p, 10, 64)
	acquire(t, ctx, clients[0], "batch", "owner-A", time.Minute, p)
	acquire(t, ctx, clients[1], "batch", "owner-A", time.Minute, p)
	stale := acquire(t, ctx, clients[2], "batch", "owner-S", time.Minute, "") // a stale minority grant

	f, err := in.ForceRelease(ctx, key, backend.Force{By: "ops", Reason: "drill"})
	require.NoError(t, err)
	assert.Equal(t, backend.Forced{Released: true, Token: tok, Floor: tok + 1, Owner: "owner-A", Count: 1, Servers: 2}, f)
	st, err := in.Inspect(ctx, key)
	require.NoError(t, err)
	assert.Empty(t, st.Owner)
	assert.Equal(t, "owner-S", st.Nodes[2].State.Owner, "the minority's holder is not the quorum's")
	assert.Equal(t, stale, st.Nodes[2].State.Token)
	require.Len(t, st.Forced, 1, "the entry of both nodes that freed it, once")
	assert.Equal(t, "drill", st.Forced[0].Reason)

	f, err = in.ForceRelease(ctx, key, backend.Force{By: "ops", Reason: "drill"})
	require.NoError(t, err)
	assert.Equal(t, backend.Forced{}, f, "no quorum holds it")
	f, err = in.ForceRelease(ctx, key, backend.Force{Token: tok, By: "ops", Reason: "drill"})
	require.NoError(t, err)
	assert.Equal(t, backend.Forced{Token: stale}, f, "node 2 holds it under another token")

	p = proposal()
	for _, c := range clients {
		acquire(t, ctx, c, "again", "owner-A", time.Minute, p)
	}
	srvs[1].Kill()
	srvs[2].Kill()
	tok, _ = strconv.ParseInt(p, 10, 64)
	f, err = in.ForceRelease(ctx, "again", backend.Force{Token: tok, By: "ops", Reason: "drill"})
	assert.ErrorIs(t, err, backend.ErrUnavailable)
	assert.ErrorContains(t, err, `forced release of "again": 2 of 3 servers did not answer, the holder may keep the lock`)
	assert.True(t, f.Released, "node 0 freed it")
	assert.Equal(t, 1, f.Servers)
}
