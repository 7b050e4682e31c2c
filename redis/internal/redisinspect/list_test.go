package redisinspect_test

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisinspect"
)

// listAll walks a listing page after page and returns its keys by user
// key, the cursors it passed and the pages' Skipped.
func listAll(t *testing.T, ctx context.Context, in *redisinspect.Inspector, r backend.ListRequest) (map[string]backend.KeyState, []string, []error) {
	t.Helper()
	keys := map[string]backend.KeyState{}
	var cursors []string
	var skipped []error
	for range 10000 {
		page, err := in.List(ctx, r)
		require.NoError(t, err)
		assert.LessOrEqual(t, page.RoundTrips, r.Scans+1)
		for _, st := range page.Keys {
			keys[st.Key] = st // as the caller names it, without the driver's prefix
		}
		skipped = append(skipped, page.Skipped...)
		if page.Cursor == "" {
			return keys, cursors, skipped
		}
		cursors = append(cursors, page.Cursor)
		r.Cursor = page.Cursor
	}
	t.Fatal("the listing never ended")
	return nil, nil, nil
}

// A listing of a Cluster scans every master, one after another, its
// cursor naming the master it continues on; it returns free keys too, and
// matches the user keys.
func TestListClusterPages(t *testing.T) {
	cl := redistest.RedisCluster(t, 3)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{cl.Client}, Publish: "SPUBLISH"})
	want := map[string]int64{}
	for i := range 30 {
		k := fmt.Sprintf("acct:%d", i)
		want[k] = acquire(t, ctx, cl.Client, k, "owner-A", time.Minute, "")
	}
	release(t, ctx, cl.Client, "acct:7", "owner-A", want["acct:7"])
	acquire(t, ctx, cl.Client, "odd{brace}", "owner-A", time.Minute, "")
	require.NoError(t, cl.Client.Set(ctx, prefix+"not-a-lock", "x", time.Hour).Err())

	keys, cursors, skipped := listAll(t, ctx, in, backend.ListRequest{Count: 4, Scans: 1})
	assert.Empty(t, skipped)
	assert.Len(t, keys, 31, "every lock key once, and nothing else")
	for k, tok := range want {
		require.Contains(t, keys, k)
		assert.Equal(t, tok, keys[k].Token, k)
	}
	assert.Empty(t, keys["acct:7"].Owner, "free keys are listed, free")
	assert.Equal(t, "owner-A", keys["odd{brace}"].Owner)
	assert.Empty(t, keys["acct:1"].Forced, "a listing leaves the audit to Inspect")
	for _, m := range cl.Masters {
		assert.True(t, cursorsName(cursors, m.Addr()), "no cursor continues on master %s: %v", m.Addr(), cursors)
	}

	keys, _, _ = listAll(t, ctx, in, backend.ListRequest{Match: "acct:1*", Count: 100, Scans: 10})
	assert.Len(t, keys, 11, "acct:1 and acct:10..19")

	page, err := in.List(ctx, backend.ListRequest{Count: 1, Scans: 1000, Limit: 1})
	require.NoError(t, err)
	assert.NotEmpty(t, page.Keys)
	assert.NotEmpty(t, page.Cursor, "the page ended at its first key")
	assert.Less(t, page.RoundTrips, 100)
}

// cursorsName reports whether a cursor continues on addr.
func cursorsName(cursors []string, addr string) bool {
	for _, c := range cursors {
		if strings.HasSuffix(c, ":"+addr) {
			return true
		}
	}
	return false
}

// A Redlock listing lists each key once, as the quorum sees it: the
// minority's lock as free.
func TestListRedlock(t *testing.T) {
	clients, addrs, _ := nodes(t, 3)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: clients, Addrs: addrs, Quorum: 2})
	p := proposal()
	for _, c := range clients[1:] {
		acquire(t, ctx, c, "batch", "owner-A", time.Minute, p)
	}
	acquire(t, ctx, clients[0], "minority", "owner-M", time.Minute, "")
	keys, _, skipped := listAll(t, ctx, in, backend.ListRequest{Count: 10, Scans: 1})
	assert.Empty(t, skipped)
	require.Len(t, keys, 2)
	assert.Equal(t, "owner-A", keys["batch"].Owner)
	assert.Len(t, keys["batch"].Nodes, 3)
	assert.Empty(t, keys["minority"].Owner)
}

// A Redlock listing that a quorum answers, but not every node, returns
// what it found and says it is partial; one that fewer answer is an error
// on every page, never an empty page.
func TestListRedlockNeedsAQuorum(t *testing.T) {
	clients, addrs, srvs := nodes(t, 3)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: clients, Addrs: addrs, Quorum: 2})
	p := proposal()
	for _, c := range clients {
		acquire(t, ctx, c, "batch", "owner-A", time.Minute, p)
	}
	srvs[2].Kill()
	keys, _, skipped := listAll(t, ctx, in, backend.ListRequest{Count: 10, Scans: 10})
	require.Len(t, keys, 1, "what the majority holds is found")
	assert.Equal(t, "owner-A", keys["batch"].Owner)
	require.NotEmpty(t, skipped)
	assert.ErrorContains(t, skipped[0], "scan node 2 ("+addrs[2]+")")

	for _, tc := range []struct {
		kill     int
		answered string
	}{{1, "1 of 3 nodes answered, 2 needed"}, {0, "0 of 3 nodes answered, 2 needed"}} {
		srvs[tc.kill].Kill()
		for cursor := ""; ; {
			page, err := in.List(ctx, backend.ListRequest{Cursor: cursor, Count: 10, Scans: 1})
			if err != nil {
				assert.ErrorIs(t, err, backend.ErrUnavailable)
				assert.ErrorContains(t, err, tc.answered)
				assert.Empty(t, page.Keys)
				assert.Positive(t, page.RoundTrips)
				break
			}
			require.NotEmpty(t, page.Cursor, "a listing without a quorum reached its end: %+v", page)
			cursor = page.Cursor
		}
	}
}

// A Redlock node that hangs gets its share of the page's deadline and is
// skipped: the listing goes on with the others and says it is partial.
func TestListRedlockSkipsAHungNode(t *testing.T) {
	clients, addrs, _ := nodes(t, 2)
	hung, _ := testutil.HungServer(t)
	hc := redis.NewClient(&redis.Options{Addr: hung, MaxRetries: -1})
	clients = append([]redis.UniversalClient{hc}, clients...)
	addrs = append([]string{hung}, addrs...)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: clients, Addrs: addrs, Quorum: 2})
	p := proposal()
	for _, c := range clients[1:] {
		acquire(t, ctx, c, "batch", "owner-A", time.Minute, p)
	}

	const deadline = 2 * time.Second
	late := testutil.MeasureLateness(t)
	start := time.Now()
	page, err := func() (backend.ListPage, error) {
		ctx, cancel := context.WithTimeout(ctx, deadline)
		defer cancel()
		return in.List(ctx, backend.ListRequest{Count: 10, Scans: 10})
	}()
	took := time.Since(start)
	require.NoError(t, err, "a majority answered")
	require.Len(t, page.Keys, 1)
	assert.Equal(t, "owner-A", page.Keys[0].Owner)
	require.NotEmpty(t, page.Skipped)
	assert.ErrorContains(t, page.Skipped[0], "scan node 0 ("+hung+")")
	assert.ErrorIs(t, page.Skipped[0], context.DeadlineExceeded)
	// Three nodes and the read: the hung node's share is a quarter.
	assert.Less(t, took, late.Bound(deadline/4+100*time.Millisecond))
}

// A cursor List did not hand out, or cannot continue, is refused before
// any SCAN; so are bounds out of range.
func TestListBadCursor(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}})
	for _, tc := range []struct{ cursor, says string }{
		{"garbage", "garbage"},
		{"1:0::" + srv.Addr(), "names shard 1 of 1"},
		{"0:5::10.0.0.1:6379", "the servers changed"},
		{"-1:0::x", "-1:0::x"},
		{"3:0:2.1:x", ""}, {"3:0:1.1:x", ""}, {"1:0:1:x", ""}, {"0:0:-1:x", ""}, {"1:0:0.:x", ""},
		{strings.Repeat("9", 600), "600 bytes"},
	} {
		_, err := in.List(ctx, backend.ListRequest{Cursor: tc.cursor, Count: 10, Scans: 1})
		assert.ErrorIs(t, err, backend.ErrBadCursor, tc.cursor)
		assert.ErrorContains(t, err, tc.says)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := in.List(ctx, backend.ListRequest{Cursor: "2000000000:0:1999999999:x", Count: 10, Scans: 1})
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, backend.ErrBadCursor)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "a cursor costs what its text costs")

	for _, r := range []backend.ListRequest{
		{Scans: 1001}, {Count: -1}, {Count: 100001}, {Limit: -1},
	} {
		_, err := in.List(ctx, r)
		assert.ErrorIs(t, err, backend.ErrInvalid, "%+v", r)
	}
}

// Redis's own KEYS decides what a pattern matches: List's filter agrees
// with it, over user keys.
func TestListMatchesAsRedis(t *testing.T) {
	plain, _ := redistest.Redis(t)
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}})
	keys := []string{"a", "ab", "abc", "a*c", "a?c", "a[c", "x]y", "a\\b", "job:1", "job:12", "JOB:1", "é", "a-c", "b", "{x}y"}
	for _, k := range keys {
		require.NoError(t, plain.Set(ctx, k, 1, time.Minute).Err())
		acquire(t, ctx, c, k, "owner-A", time.Minute, "")
	}
	for _, p := range []string{"*", "a*", "a?c", "a\\*c", "a[bc]*", "a[^b]*", "a[a-c]", "a[c-a]", "job:?", "job:*", "[jJ]ob:1", "*\\?*", "a\\\\b", "?", "x]y", "*]*", "a[\\[]c", "{*"} {
		want, err := plain.Keys(ctx, p).Result()
		require.NoError(t, err)
		got, _, _ := listAll(t, ctx, in, backend.ListRequest{Match: p, Count: 100, Scans: 10})
		assert.ElementsMatch(t, want, slices.Collect(maps.Keys(got)), "pattern %q", p)
	}
}
