package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

func short(fencing bool) options {
	return options{fencing: fencing, workers: 3, accounts: 4, transfers: 10, stalls: 1, ttl: 150 * time.Millisecond}
}

// realServers points o at the package's PostgreSQL and a private redis-server.
func realServers(t *testing.T, o options) options {
	_, srv := testutil.Redis(t)
	o.dbURL, o.redisURL = testutil.PostgresURL(t), "redis://"+srv.Addr()
	return o
}

func runDemo(t *testing.T, o options) result {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := run(ctx, &out, o)
	require.NoError(t, err)
	t.Log("\n" + out.String())
	return res
}

// TestFencingHolds: the stalled worker's write is rejected and no money is
// created or destroyed. Real PostgreSQL and redis-server via the URLs.
func TestFencingHolds(t *testing.T) {
	o := realServers(t, short(true))
	res := runDemo(t, o)
	assert.Equal(t, res.totalBefore, res.totalAfter, "the invariant holds")
	assert.GreaterOrEqual(t, res.staleRejected, int64(1))
	assert.Zero(t, res.staleAccepted)
	assert.Equal(t, int64(o.workers*o.transfers)-res.staleRejected, res.committed)
}

// TestWithoutFencingCorrupts: the same run without the fence shows the lost
// update the fence prevents.
func TestWithoutFencingCorrupts(t *testing.T) {
	o := realServers(t, short(false))
	res := runDemo(t, o)
	assert.NotEqual(t, res.totalBefore, res.totalAfter, "the stale write must break the invariant")
	assert.GreaterOrEqual(t, res.staleAccepted, int64(1))
}

// TestDefaults runs the demo as a newcomer does: no DATABASE_URL (a
// throwaway cluster), no REDIS_URL (embedded Redis).
func TestDefaults(t *testing.T) {
	res := runDemo(t, short(true))
	assert.Equal(t, res.totalBefore, res.totalAfter)
	assert.GreaterOrEqual(t, res.staleRejected, int64(1))
}
