package redlockdriver_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// TestQuorumGrantAndHeld: a grant holds a majority of nodes under one
// token; another owner finds it Held, with each node's answer in a
// QuorumError that matches ErrNotAcquired; once released, the next grant
// has a larger token.
func TestQuorumGrantAndHeld(t *testing.T) {
	clients, _ := nodes(t, 5)
	d := newDriver(t, clients)
	ctx := context.Background()
	key, a := "grant", owner(t)

	l := acquire(t, d, backend.Attempt{Key: key, Owner: a, TTL: 10 * time.Second})
	held := 0
	for _, c := range clients {
		if v, ok := redisproto.ParseValue(value(t, c, key)); ok && v.Owner == a {
			assert.Equal(t, l.Token, v.Token, "one token on every node that holds it")
			held++
		}
	}
	assert.GreaterOrEqual(t, held, d.Quorum())

	g, err := d.Acquire(ctx, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Second})
	require.NoError(t, err)
	assert.Equal(t, backend.Held, g.Status)
	assert.Greater(t, g.Remaining, 9*time.Second)
	assert.LessOrEqual(t, g.Remaining, 10*time.Second)
	require.ErrorIs(t, g.Detail, backend.ErrNotAcquired)
	assert.NotErrorIs(t, g.Detail, backend.ErrUnavailable)
	var qerr *redlockdriver.QuorumError
	require.ErrorAs(t, g.Detail, &qerr)
	assert.Equal(t, 3, qerr.Quorum)
	assert.Equal(t, d.Addrs(), qerr.Addrs)
	assert.False(t, qerr.Late)
	refused := 0
	for i, e := range qerr.Nodes {
		switch {
		case e == backend.ErrNotAcquired:
			refused++
		case e != redlockdriver.ErrNotAwaited:
			t.Errorf("node %d: %v", i, e)
		}
	}
	assert.GreaterOrEqual(t, refused, 3, "decided by three refusals")
	assert.Contains(t, qerr.Error(), "redlockdriver: 0 of 5 nodes granted the lock, a quorum needs 3; node 0 ("+d.Addrs()[0]+"): ")

	left, err := d.Release(ctx, l)
	require.NoError(t, err)
	assert.Zero(t, left)
	released(t, clients, key)
	next := acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Second})
	assert.Greater(t, next.Token, l.Token)
	_, err = d.Release(ctx, next)
	require.NoError(t, err)
}

// TestSharedOwnerReenters: a shared owner re-enters from another attempt
// with the same token, and each Release takes one count.
func TestSharedOwnerReenters(t *testing.T) {
	clients, _ := nodes(t, 3)
	d := newDriver(t, clients)
	ctx := context.Background()
	a := backend.Attempt{Key: "re", Owner: "job-7", TTL: 10 * time.Second, Shared: true}
	first := acquire(t, d, a)
	g, err := d.Acquire(ctx, a)
	require.NoError(t, err)
	assert.Equal(t, backend.Reentered, g.Status)
	assert.Equal(t, first.Token, g.Token)
	second := backend.Lease{Key: a.Key, Owner: a.Owner, Token: g.Token, Handle: g.Handle}

	left, err := d.Release(ctx, second)
	require.NoError(t, err)
	assert.Equal(t, int64(1), left)
	for _, c := range clients {
		assert.Equal(t, "job-7", holder(t, c, a.Key), "one count left on every node")
	}
	left, err = d.Release(ctx, first)
	require.NoError(t, err)
	assert.Zero(t, left)
	released(t, clients, a.Key)
	left, err = d.Release(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), left, "a retry finds nothing to take")
}

// TestNodesDown: a minority down costs nothing; without a majority the
// attempt fails fast with an outage (ErrUnavailable, not ErrNotAcquired),
// and tokens go on increasing once the nodes come back empty.
func TestNodesDown(t *testing.T) {
	clients, srvs := nodes(t, 5)
	d := newDriver(t, clients)
	ctx := context.Background()
	key := "down"
	l := acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Second})
	_, err := d.Release(ctx, l)
	require.NoError(t, err)
	released(t, clients, key)

	srvs[0].Kill()
	srvs[1].Kill()
	l2 := acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Second})
	assert.Greater(t, l2.Token, l.Token)
	_, err = d.Release(ctx, l2)
	require.NoError(t, err, "3 of 5 release")
	released(t, clients[2:], key)

	srvs[2].Kill()
	late := testutil.MeasureLateness(t)
	start := time.Now()
	g, err := d.Acquire(ctx, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Second})
	took := time.Since(start)
	require.Error(t, err)
	assert.Equal(t, backend.Grant{}, g)
	assert.ErrorIs(t, err, backend.ErrUnavailable)
	assert.NotErrorIs(t, err, backend.ErrNotAcquired, "an outage is not contention")
	assert.ErrorIs(t, err, backend.ErrGivenBack, "the driver gave back what it took: no Abandon after it")
	var qerr *redlockdriver.QuorumError
	require.ErrorAs(t, err, &qerr)
	assert.False(t, qerr.Late)
	for i := range 3 {
		assert.Error(t, qerr.Nodes[i], "node %d is down", i)
		assert.NotErrorIs(t, qerr.Nodes[i], backend.ErrNotAcquired)
	}
	assert.Less(t, took, late.Bound(time.Second))

	for _, s := range srvs[:3] {
		s.Restart() // empty: their counters are gone
	}
	waitFor(t, "the restarted nodes to grant", func() bool {
		g, err := d.Acquire(ctx, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Second})
		if err != nil {
			return false
		}
		assert.Greater(t, g.Token, l2.Token, "tokens never go backwards after nodes come back empty")
		return true
	})
}

// TestCounterAheadRaised: a node whose counter is far ahead drives one
// grant's token; the raise round carries that token to a majority, so
// later grants without that node still issue larger tokens.
func TestCounterAheadRaised(t *testing.T) {
	clients, srvs := nodes(t, 5)
	d := newDriver(t, clients)
	ctx := context.Background()
	key := "fast"
	ahead := time.Now().Add(24 * time.Hour).UnixMicro()
	require.NoError(t, clients[0].Set(ctx, redisproto.LockKey(prefix, "fast"), fmt.Sprint(ahead), time.Hour).Err())

	// A shared owner waits for every node (a random one stops at the first
	// majority, which may leave the fast node out).
	l := acquire(t, d, backend.Attempt{Key: key, Owner: "first", TTL: time.Second, Shared: true})
	require.Greater(t, l.Token, ahead, "the fast node's counter set the token")
	for i, c := range clients {
		v, ok := redisproto.ParseValue(value(t, c, key))
		require.True(t, ok)
		assert.Equal(t, strconv.FormatInt(l.Token, 10), strconv.FormatInt(v.Token, 10), "node %d carries the chosen token", i)
	}
	_, err := d.Release(ctx, l)
	require.NoError(t, err)
	released(t, clients, key)

	srvs[0].Kill() // the fast node is out of every later quorum
	last := l.Token
	for range 3 {
		l := acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Second})
		assert.Greater(t, l.Token, last)
		last = l.Token
		_, err := d.Release(ctx, l)
		require.NoError(t, err)
		released(t, clients[1:], key)
	}
}

// TestSpanEvents: an attempt records its votes and its token on the
// caller's span.
func TestSpanEvents(t *testing.T) {
	clients, _ := nodes(t, 3)
	d := newDriver(t, clients)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	ctx, span := tp.Tracer("test").Start(context.Background(), "lock")
	l := acquire(t, d, backend.Attempt{Key: "span", Owner: "o", TTL: time.Second, Shared: true})
	g, err := d.Acquire(ctx, backend.Attempt{Key: "span", Owner: "other", TTL: time.Second, Shared: true})
	require.NoError(t, err)
	require.Equal(t, backend.Held, g.Status)
	won, err := d.Acquire(ctx, backend.Attempt{Key: "span2", Owner: "o", TTL: time.Second, Shared: true})
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, won.Status)
	span.End()

	ended := rec.Ended()
	require.Len(t, ended, 1)
	events := ended[0].Events()
	require.Len(t, events, 3, "held: the votes; granted: the votes and the token")
	attrs := func(i int) map[string]string {
		m := map[string]string{}
		for _, kv := range events[i].Attributes {
			m[string(kv.Key)] = kv.Value.String()
		}
		return m
	}
	assert.Equal(t, "redlock.acquire", events[0].Name)
	held := attrs(0)
	assert.NotEmpty(t, held["redfence.redlock.validity"])
	delete(held, "redfence.redlock.validity")
	assert.Equal(t, map[string]string{"redfence.redlock.votes": "0", "redfence.redlock.quorum": "2", "redfence.redlock.nodes": "held,held,held"}, held)
	assert.Equal(t, "redlock.acquire", events[1].Name)
	assert.Equal(t, "acquired,acquired,acquired", attrs(1)["redfence.redlock.nodes"])
	assert.Equal(t, "3", attrs(1)["redfence.redlock.votes"])
	assert.Equal(t, "redlock.token", events[2].Name)
	assert.Equal(t, map[string]string{"redfence.redlock.agreed": "true", "redfence.redlock.confirmed": "3", "redfence.token": strconv.FormatInt(won.Token, 10)}, attrs(2))
	_, err = d.Release(context.Background(), l)
	require.NoError(t, err)
}
