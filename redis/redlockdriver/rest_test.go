package redlockdriver_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// TestPausedNodeCostsANodeTimeout: one SIGSTOPped node of 5 costs an
// attempt and a release at most the node timeout, although the clients
// wait 3 s by default.
func TestPausedNodeCostsANodeTimeout(t *testing.T) {
	clients, srvs := nodes(t, 5)
	const nodeTimeout = 100 * time.Millisecond
	d := newDriver(t, clients, redlockdriver.WithStoreTimeout(nodeTimeout))
	ctx := context.Background()
	key := "p"
	l := acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: 10 * time.Second}) // warms connections and scripts
	_, err := d.Release(ctx, l)
	require.NoError(t, err)
	released(t, clients, key)

	srvs[4].Pause()
	t.Cleanup(srvs[4].Resume) // before Close, so its pending calls finish
	late := testutil.MeasureLateness(t)
	start := time.Now()
	l = acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: 10 * time.Second})
	assert.Less(t, time.Since(start), late.Bound(nodeTimeout*2+50*time.Millisecond))
	start = time.Now()
	left, err := d.Release(ctx, l)
	require.NoError(t, err)
	assert.Zero(t, left)
	assert.Less(t, time.Since(start), late.Bound(nodeTimeout+50*time.Millisecond))
}

// TestRestsAnUnansweringNode: once a call to a paused node is out past
// the node timeout (the client's own read timeout is a minute), attempts
// stop asking it until its rest is over by the driver's clock; then one
// attempt asks it again, and once it answers every attempt asks it.
func TestRestsAnUnansweringNode(t *testing.T) {
	clients, srvs := nodes(t, 5)
	slow := redis.NewClient(&redis.Options{Addr: srvs[4].Addr(), DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Minute, MaxRetries: -1})
	t.Cleanup(func() { _ = slow.Close() })
	clients[4] = slow
	calls := &redistest.Calls{} // its dials too, which only a call to it makes
	slow.AddHook(calls)
	// The clock stands still unless the test moves it: a rest ends only
	// when the test says so, however slow the host.
	base := time.Now()
	var moved atomic.Int64
	clock := func() time.Time { return base.Add(time.Duration(moved.Load())) }
	d := newDriver(t, clients, redlockdriver.WithStoreTimeout(50*time.Millisecond), redlockdriver.WithClock(clock))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// A key per cycle: a release returns once a majority freed it, and
	// the next cycle must not find the others still held.
	n := 0
	cycle := func() {
		t.Helper()
		n++
		l := acquire(t, d, backend.Attempt{Key: "rest" + strconv.Itoa(n), Owner: owner(t), TTL: 10 * time.Second})
		_, err := d.Release(ctx, l)
		require.NoError(t, err)
	}
	cycle() // warm every connection and script

	srvs[4].Pause()
	t.Cleanup(srvs[4].Resume) // before Close, so its pending calls finish
	cycle()
	waitFor(t, "the paused node to rest", func() bool { return redlockdriver.NodeResting(d, 4) })
	before := calls.N()
	const cycles = 20
	for range cycles {
		cycle()
	}
	// What may still arrive is the clean-up of the attempt that met the
	// pause; no attempt asked the node.
	assert.LessOrEqual(t, calls.N()-before, int64(2), "a resting node is not asked")

	moved.Add(int64(2 * time.Second)) // past any rest
	asked := calls.N()
	cycle()
	waitFor(t, "the probe of the rested node", func() bool { return calls.N() > asked })

	srvs[4].Resume()
	for redlockdriver.NodeResting(d, 4) {
		require.NoError(t, ctx.Err(), "waiting for the resumed node to answer a probe")
		moved.Add(int64(2 * time.Second))
		cycle()
	}
	asked = calls.N()
	for range cycles {
		cycle()
	}
	// An acquire and a release a cycle; the last cycle's may not have
	// started yet (the quorum of the others decides).
	assert.GreaterOrEqual(t, calls.N()-asked, int64(2*(cycles-1)), "a node that answered again is asked by every attempt")
}
