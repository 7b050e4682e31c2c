package redlockdriver_test

import (
	"context"
	"strconv"
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

// TestReleaseAllBoundedWithHungNode: with one node that accepts and never
// answers, ReleaseAll of many locks, some still settling on that node,
// takes at most twice the node timeout (one settle wait, one release
// wait) under a ctx without a deadline, and releases them on the others.
func TestReleaseAllBoundedWithHungNode(t *testing.T) {
	_, srvs := redistest.RedisN(t, 4)
	hungAddr, _ := testutil.HungServer(t)
	clients := make([]redis.UniversalClient, 0, 5)
	for _, s := range srvs {
		clients = append(clients, client(t, s.Addr()))
	}
	// Its calls end at the read timeout, which Close waits for.
	hung := redis.NewClient(&redis.Options{Addr: hungAddr, DialTimeout: 200 * time.Millisecond, ReadTimeout: time.Second, MaxRetries: -1})
	t.Cleanup(func() { _ = hung.Close() })
	clients = append(clients, hung)
	const nodeTimeout = 100 * time.Millisecond
	d := newDriver(t, clients, redlockdriver.WithStoreTimeout(nodeTimeout))
	ctx := context.Background()

	leases := make([]backend.Lease, 50)
	lateOnes := 0
	for i := range leases {
		leases[i] = acquire(t, d, backend.Attempt{Key: "all" + strconv.Itoa(i), Owner: owner(t), TTL: time.Minute})
		if len(redlockdriver.LateNodes(leases[i].Handle)) > 0 {
			lateOnes++
		}
	}
	// Attempts ask the hung node until its first call is out a node
	// timeout; two unsettled holds or more test one settle wait for all.
	require.GreaterOrEqual(t, lateOnes, 2, "attempts before the hung node rests ask it")

	late := testutil.MeasureLateness(t)
	start := time.Now()
	err := d.ReleaseAll(ctx, leases)
	took := time.Since(start)
	require.NoError(t, err, "four of five nodes released")
	assert.Less(t, took, late.Bound(2*nodeTimeout+50*time.Millisecond), "ReleaseAll took %v", took)
	for _, l := range leases {
		for i, c := range clients[:4] {
			assert.Empty(t, holder(t, c, l.Key), "node %d still holds %s", i, l.Key)
		}
	}
}
