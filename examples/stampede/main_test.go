package main

import (
	"bytes"
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/stampede"
	"github.com/redfence/redfence/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// check asserts what the demo promises: every request reaches the origin
// without protection, and exactly one does with redfence.
func check(t *testing.T, o options) {
	var out, progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results, err := run(ctx, &out, &progress, o)
	require.NoError(t, err)
	require.Len(t, results, 3)
	byMode := map[stampede.Mode]stampede.Result{}
	for _, r := range results {
		byMode[r.Mode] = r
		assert.Zero(t, r.Errors, "%s: errors", r.Mode)
	}
	assert.Equal(t, int64(o.requests), byMode[stampede.None].OriginCalls)
	assert.GreaterOrEqual(t, byMode[stampede.Singleflight].OriginCalls, int64(o.replicas))
	assert.Equal(t, int64(1), byMode[stampede.Redfence].OriginCalls)
	assert.Contains(t, out.String(), "redfence httplock")
	assert.Regexp(t, `redfence httplock\s+1\s`, out.String(), "the table shows one origin call")
	assert.Contains(t, progress.String(), "/"+strconv.Itoa(o.requests), "a progress indicator ran")
	t.Log("\n" + out.String())
}

// TestEmbedded runs the demo as a newcomer does: no REDIS_URL, embedded Redis.
func TestEmbedded(t *testing.T) {
	check(t, options{replicas: 4, requests: 200, delay: 100 * time.Millisecond})
}

// TestRealRedis runs it against a real redis-server through REDIS_URL's path.
func TestRealRedis(t *testing.T) {
	_, srv := testutil.Redis(t)
	check(t, options{replicas: 4, requests: 200, delay: 100 * time.Millisecond, redisURL: "redis://" + srv.Addr() + "/0"})
}
