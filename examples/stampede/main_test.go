package main

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"

	"github.com/redfence/redfence/examples/stampede/burst"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// check asserts what the demo promises: every request reaches the origin
// without protection, and exactly one does with redfence; and that what it
// concludes is what it measured.
func check(t *testing.T, o options) {
	var out, progress bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	results, err := run(ctx, &out, &progress, o)
	require.NoError(t, err)
	require.Len(t, results, 3)
	byMode := map[burst.Mode]burst.Result{}
	for _, r := range results {
		byMode[r.Mode] = r
		assert.Zero(t, r.Errors, "%s: errors", r.Mode)
	}
	none, sf, rf := byMode[burst.None], byMode[burst.Singleflight], byMode[burst.Redfence]
	assert.Equal(t, int64(o.requests), none.OriginCalls)
	assert.GreaterOrEqual(t, sf.OriginCalls, int64(o.replicas))
	assert.Equal(t, int64(1), rf.OriginCalls)
	assert.Regexp(t, `redfence httplock\s+1\s`, out.String(), "the table shows one origin call")
	assert.Contains(t, progress.String(), "/"+strconv.Itoa(o.requests), "a progress indicator ran")

	assert.True(t, conclude(&out, o, results))
	assert.Contains(t, out.String(), fmt.Sprintf("the %d replicas made %d origin call between them", o.replicas, rf.OriginCalls))
	assert.Contains(t, out.String(), fmt.Sprintf("1 call instead of %d with singleflight per replica\nand %d without protection", sf.OriginCalls, none.OriginCalls))
	t.Log("\n" + out.String())
}

// TestEmbedded runs the demo as a newcomer does: no REDIS_URL, embedded Redis.
func TestEmbedded(t *testing.T) {
	check(t, options{replicas: 4, requests: 200, delay: 100 * time.Millisecond})
}

// TestRealRedis runs it against a real redis-server through REDIS_URL's path.
func TestRealRedis(t *testing.T) {
	_, srv := redistest.Redis(t)
	check(t, options{replicas: 4, requests: 200, delay: 100 * time.Millisecond, redisURL: "redis://" + srv.Addr() + "/0"})
}

// TestUnreachableRedis: a REDIS_URL nobody answers at ends the demo within
// seconds with an error that names the address, before any burst runs.
func TestUnreachableRedis(t *testing.T) {
	for name, addr := range map[string]string{
		"refused": "127.0.0.1:1",
		"silent":  testutil.SilentServer(t),
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			late := testutil.MeasureLateness(t)
			start := time.Now()
			_, err := run(ctx, &out, &bytes.Buffer{}, options{replicas: 4, requests: 200, delay: 100 * time.Millisecond, redisURL: "redis://" + addr})
			require.Error(t, err)
			assert.Less(t, time.Since(start), late.Bound(10*time.Second))
			assert.Contains(t, err.Error(), "cannot reach Redis at "+addr+": ")
			assert.Contains(t, err.Error(), "unset REDIS_URL")
			assert.Empty(t, out.String(), "nothing is concluded")
		})
	}
}

// TestConclude: every number in the conclusion is the measured one, and a run
// that did not collapse the burst says so instead of claiming it did.
func TestConclude(t *testing.T) {
	o := options{replicas: 4, requests: 1000}
	results := func(none, sf, rf int64, rfErrors int, rfP50 time.Duration) []burst.Result {
		return []burst.Result{
			{Mode: burst.None, OriginCalls: none, P50: 100 * time.Millisecond},
			{Mode: burst.Singleflight, OriginCalls: sf, P50: 100 * time.Millisecond},
			{Mode: burst.Redfence, OriginCalls: rf, P50: rfP50, Errors: rfErrors},
		}
	}
	for _, tc := range []struct {
		name    string
		results []burst.Result
		ok      bool
		want    []string
		wantNot []string
	}{
		{
			name:    "one call",
			results: results(1000, 4, 1, 0, 90*time.Millisecond),
			ok:      true,
			want:    []string{"the 4 replicas made 1 origin call between them", "1 call instead of 4 with singleflight per replica\nand 1000 without protection"},
			wantNot: []string{"Latency", "not 1", "failed"},
		},
		{
			name:    "singleflight called more than once per replica",
			results: results(998, 7, 1, 0, 150*time.Millisecond),
			ok:      true,
			want:    []string{"1 call instead of 7 with singleflight", "and 998 without protection", "redfence's p50 is 50.0 ms above singleflight's"},
		},
		{
			name:    "every request reached the origin",
			results: results(1000, 4, 1000, 0, 90*time.Millisecond),
			want:    []string{"the 4 replicas made 1000 origin calls between them, not 1"},
			wantNot: []string{"made 1 origin call", "made one", "instead of"},
		},
		{
			name:    "two calls",
			results: results(1000, 4, 2, 0, 90*time.Millisecond),
			want:    []string{"the 4 replicas made 2 origin calls between them, not 1"},
			wantNot: []string{"instead of"},
		},
		{
			name:    "failed requests",
			results: results(1000, 4, 1, 3, 90*time.Millisecond),
			want:    []string{"3 of the 1000 requests failed with redfence httplock", "made 1 origin call"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			assert.Equal(t, tc.ok, conclude(&out, o, tc.results))
			for _, s := range tc.want {
				assert.Contains(t, out.String(), s)
			}
			for _, s := range tc.wantNot {
				assert.NotContains(t, out.String(), s)
			}
		})
	}
}
