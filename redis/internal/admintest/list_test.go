package admintest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/glob"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/mutex/lockdebug"
	"github.com/redfence/redfence/redis/redisdriver"
)

// A listing finds exactly the held locks among many other keys, on every
// master, page by page within its bound of round trips, and filters by
// pattern, braces included; locks under another driver prefix are another
// namespace's, and not listed.
func TestListFindsHeldLocks(t *testing.T) {
	eachInspectable(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		l := newLocker(t, c)
		a := adminOf(t, l)
		pipe := c.Pipeline()
		for i := range 600 {
			pipe.Set(ctx, fmt.Sprintf("other:%d", i), "x", time.Hour)
			pipe.Set(ctx, fmt.Sprintf("redfence:noise:%d", i), "1 2 3", time.Hour)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		var want []string
		for i := range 40 {
			key := fmt.Sprintf("job:%d", i)
			if i%10 == 0 {
				key = fmt.Sprintf("job:{%d}", i)
			}
			lk, err := l.TryLock(ctx, key, mutex.WithTTL(time.Minute))
			require.NoError(t, err)
			t.Cleanup(func() { _ = lk.Release(context.Background()) })
			want = append(want, key)
		}
		for i := range 5 { // freed: remembered tokens, not locks
			lk, err := l.TryLock(ctx, fmt.Sprintf("job:freed:%d", i))
			require.NoError(t, err)
			require.NoError(t, lk.Release(ctx))
		}
		other, err := l.TryLock(ctx, "report:1")
		require.NoError(t, err)
		t.Cleanup(func() { _ = other.Release(context.Background()) })
		elsewhere := newLocker(t, c, redisdriver.WithPrefix("other-app:"))
		foreign, err := elsewhere.TryLock(ctx, "job:99", mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		t.Cleanup(func() { _ = foreign.Release(context.Background()) })

		var got []string
		o := admin.ListOptions{Match: "job:*", Count: 100, Scans: 2}
		pages := 0
		for {
			page, err := a.List(ctx, o)
			require.NoError(t, err)
			pages++
			assert.LessOrEqual(t, page.RoundTrips, o.Scans+1, "a call exceeded its bound")
			for _, in := range page.Locks {
				assert.Equal(t, admin.Held, in.State)
				assert.NotZero(t, in.Token)
				got = append(got, in.Key)
			}
			if page.Cursor == "" {
				break
			}
			o.Cursor = page.Cursor
		}
		assert.Greater(t, pages, 1, "the listing fit one page: the bound was not exercised")
		slices.Sort(want)
		slices.Sort(got)
		got = slices.Compact(got) // SCAN may return a key twice
		assert.Equal(t, want, got)

		all, err := a.ListAll(ctx, admin.ListOptions{Match: "job:freed:*", Free: true})
		require.NoError(t, err)
		assert.Len(t, all, 5, "Free lists the remembered tokens too")
		held, err := a.ListAll(ctx, admin.ListOptions{Match: "job:{[0-9]*}"})
		require.NoError(t, err)
		assert.Len(t, held, 4)

		theirs, err := adminOf(t, elsewhere).ListAll(ctx, admin.ListOptions{})
		require.NoError(t, err)
		assert.Equal(t, []string{"job:99"}, keysOf(theirs), "a driver lists its own prefix")
	})
}

// Redis's own KEYS decides what a pattern matches: the filter a listing
// applies to the keys (package glob) agrees with it.
func TestListMatchesAsRedis(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	keys := []string{"a", "ab", "abc", "a*c", "a?c", "a[c", "x]y", "a\\b", "job:1", "job:12", "JOB:1", "é", "a-c", "b"}
	for _, k := range keys {
		require.NoError(t, c.Set(ctx, k, 1, time.Minute).Err())
	}
	for _, p := range []string{"*", "a*", "a?c", "a\\*c", "a[bc]*", "a[^b]*", "a[a-c]", "a[c-a]", "job:?", "job:*", "[jJ]ob:1", "*\\?*", "a\\\\b", "?", "x]y", "*]*", "a[\\[]c"} {
		want, err := c.Keys(ctx, p).Result()
		require.NoError(t, err)
		var got []string
		for _, k := range keys {
			if glob.Match(p, k) {
				got = append(got, k)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		assert.Equal(t, want, got, "pattern %q", p)
	}
}

// A Redlock listing that fewer than a quorum of nodes answer is an error,
// never "no locks"; one that a quorum answers, but not every node, returns
// what it found and says it is partial.
func TestListRedlockNeedsAQuorum(t *testing.T) {
	clients, srvs := redlockNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk := lockEverywhere(t, ctx, clients, "batch")
	viewer := adminOf(t, newRedlock(t, clients))

	locks, err := viewer.ListAll(ctx, admin.ListOptions{})
	require.NoError(t, err, "every node answered: a whole listing")
	require.Len(t, locks, 1)

	srvs[2].Kill()
	locks, err = viewer.ListAll(ctx, admin.ListOptions{})
	assert.ErrorIs(t, err, admin.ErrPartial)
	assert.NotErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorContains(t, err, srvs[2].Addr())
	require.Len(t, locks, 1, "what the majority holds is found")
	assert.Equal(t, lk.Token(), locks[0].Token)

	for _, tc := range []struct {
		kill     int
		answered string
	}{{1, "1 of 3 nodes answered, 2 needed"}, {0, "0 of 3 nodes answered, 2 needed"}} {
		srvs[tc.kill].Kill()
		locks, err = viewer.ListAll(ctx, admin.ListOptions{})
		assert.ErrorIs(t, err, mutex.ErrUnavailable, tc.answered)
		assert.ErrorContains(t, err, tc.answered)
		assert.Empty(t, locks)
		for cursor := ""; ; {
			// No page of the listing is an empty answer.
			page, err := viewer.List(ctx, admin.ListOptions{Cursor: cursor, Scans: 1})
			if err != nil {
				assert.ErrorIs(t, err, mutex.ErrUnavailable)
				assert.Empty(t, page.Locks)
				break
			}
			require.NotEmpty(t, page.Cursor, "a listing without a quorum reached its end: %+v", page)
			cursor = page.Cursor
		}
		_, err = viewer.Inspect(ctx, "batch")
		assert.ErrorIs(t, err, mutex.ErrUnavailable)
	}
}

// A Redlock node whose SCAN failed listed nothing: a lock it holds is
// listed from a later node, although the failed node answers the read.
func TestListRedlockAfterASkippedNode(t *testing.T) {
	_, rest := redistest.RedisN(t, 2)
	srvs := append([]*redistest.RedisServer{redistest.StartRedis(t, redistest.WithRedisArgs("--rename-command", "SCAN", "SCAN-hidden"))}, rest...)
	clients := make([]redis.UniversalClient, len(srvs))
	for i, s := range srvs {
		// A refused node fails at once, not after go-redis's retries.
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rl := newRedlock(t, clients)
	lk, err := rl.Lock(ctx, "batch", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	waitHeldEverywhere(t, ctx, clients, "redfence:{batch}")
	locks, err := adminOf(t, newRedlock(t, clients)).ListAll(ctx, admin.ListOptions{})
	assert.ErrorIs(t, err, admin.ErrPartial)
	assert.ErrorContains(t, err, "scan node 0")
	require.Len(t, locks, 1)
	assert.Equal(t, lk.Token(), locks[0].Token)
}

// A Redlock node that hangs is skipped within the page's deadline: the
// listing goes on with the others and says it is partial.
func TestListRedlockSkipsAHungNode(t *testing.T) {
	clients, srvs := redlockNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk := lockEverywhere(t, ctx, clients, "batch")
	viewer := adminOf(t, newRedlock(t, clients))
	_, err := viewer.ListAll(ctx, admin.ListOptions{}) // connections made before the pause
	require.NoError(t, err)
	srvs[0].Pause()
	t.Cleanup(srvs[0].Resume)

	page, err := func() (admin.Page, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return viewer.List(ctx, admin.ListOptions{})
	}()
	require.NoError(t, err, "a majority answered")
	require.Len(t, page.Locks, 1)
	assert.Equal(t, lk.Token(), page.Locks[0].Token)
	require.NotEmpty(t, page.Skipped)
	assert.ErrorContains(t, page.Skipped[0], "scan node 0")
}

// One server whose read fails is an outage, in the listing too; a server
// without EVALSHA_RO is read with EVALSHA.
func TestListReadFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, srv := redistest.Redis(t, redistest.WithRedisArgs("--rename-command", "EVALSHA_RO", "EVALSHA_RO_hidden"))
	_, err := newLocker(t, c).Lock(ctx, "acct:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	viewer := viewerOf(t, c)
	in, err := viewer.Inspect(ctx, "acct:1")
	require.NoError(t, err, "EVALSHA when EVALSHA_RO is unknown")
	assert.Equal(t, admin.Held, in.State)
	locks, err := viewer.ListAll(ctx, admin.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, locks, 1)

	// A user that may SCAN but not run scripts: the read fails.
	require.NoError(t, c.Do(ctx, "ACL", "SETUSER", "viewer", "on", ">pw", "~*", "+@all", "-@scripting").Err())
	vc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "viewer", Password: "pw"})
	t.Cleanup(func() { _ = vc.Close() })
	_, err = viewerOf(t, vc).List(ctx, admin.ListOptions{})
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorContains(t, err, "NOPERM")
}

// A parsed cursor costs what its text costs, whatever numbers it holds.
func TestListCursorIsCheap(t *testing.T) {
	c, _ := redistest.Redis(t)
	a := viewerOf(t, c)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := a.List(context.Background(), admin.ListOptions{Cursor: "2000000000:0:1999999999:x"})
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, mutex.ErrInvalid)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20))
	for _, bad := range []string{"3:0:2.1:x", "3:0:1.1:x", "1:0:1:x", "0:0:-1:x", "1:0:0.:x"} {
		_, err := a.List(context.Background(), admin.ListOptions{Cursor: bad})
		assert.ErrorIs(t, err, mutex.ErrInvalid, bad)
	}
}

// List over an outside backend: the match pattern (the backend's keys are
// filtered again), page after page with the backend's cursor, a cursor the
// backend refuses as bad input, and Limit ending a call early. Every
// Locker's keys over the backend are its listing.
func TestListOverABackend(t *testing.T) {
	m := newMemory()
	l := testutil.WithBackend(t, m)
	a := adminOf(t, l)
	other := adminOf(t, testutil.WithBackend(t, m))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, key := range []string{"orders:1", "orders:2", "orders:3", "jobs:1"} {
		_, err := l.Lock(ctx, key, mutex.WithTTL(time.Hour))
		require.NoError(t, err)
	}
	_, err := other.Locker().Lock(ctx, "orders:9", mutex.WithTTL(time.Hour))
	require.NoError(t, err)

	page, err := a.List(ctx, admin.ListOptions{Match: "orders:*"})
	require.NoError(t, err)
	assert.Equal(t, []string{"orders:1", "orders:2", "orders:3", "orders:9"}, keysOf(page.Locks), "the keys that match, whoever holds them")
	assert.Empty(t, page.Cursor, "one page held them all")
	assert.Equal(t, 1, page.RoundTrips)

	var all []string
	o := admin.ListOptions{Scans: 1, Count: 1}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10, "the listing does not end")
		page, err := a.List(ctx, o)
		require.NoError(t, err)
		assert.Equal(t, 1, page.RoundTrips)
		all = append(all, keysOf(page.Locks)...)
		if page.Cursor == "" {
			break
		}
		o.Cursor = page.Cursor
	}
	assert.Equal(t, []string{"jobs:1", "orders:1", "orders:2", "orders:3", "orders:9"}, all, "page after page, each key once")

	page, err = a.List(ctx, admin.ListOptions{Count: 1, Limit: 2})
	require.NoError(t, err)
	assert.Len(t, page.Locks, 2, "Limit ended the call")
	assert.Equal(t, 2, page.RoundTrips)
	assert.NotEmpty(t, page.Cursor)

	_, err = a.List(ctx, admin.ListOptions{Cursor: "3:0::127.0.0.1:6379"})
	assert.ErrorIs(t, err, mutex.ErrInvalid, "a cursor the backend did not hand out")
	locks, err := other.ListAll(ctx, admin.ListOptions{Match: "jobs:*"})
	require.NoError(t, err)
	assert.Equal(t, []string{"jobs:1"}, keysOf(locks))
}

// The debug page, built on Admin, lists an outside backend's locks
// (all=1), and answers 501 for a backend without inspection.
func TestListOnTheDebugPage(t *testing.T) {
	m := newMemory()
	l := testutil.WithBackend(t, m, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing"}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lk, err := l.Lock(ctx, "orders:1", mutex.WithTTL(time.Hour))
	require.NoError(t, err)

	rec := httptest.NewRecorder()
	lockdebug.Handler(l).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?all=1&format=json", nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var p struct {
		Listing struct {
			Complete bool `json:"complete"`
			Locks    []struct {
				Key       string `json:"key"`
				State     string `json:"state"`
				Token     int64  `json:"token"`
				OwnerInfo struct {
					Service string `json:"service"`
				} `json:"owner_info"`
			} `json:"locks"`
		} `json:"listing"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &p))
	assert.True(t, p.Listing.Complete)
	require.Len(t, p.Listing.Locks, 1, rec.Body.String())
	assert.Equal(t, "orders:1", p.Listing.Locks[0].Key)
	assert.Equal(t, "held", p.Listing.Locks[0].State)
	assert.Equal(t, lk.Token(), p.Listing.Locks[0].Token)
	assert.Equal(t, "billing", p.Listing.Locks[0].OwnerInfo.Service)

	rec = httptest.NewRecorder()
	lockdebug.Handler(testutil.WithBackend(t, plain{newMemory()})).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/?all=1&format=json", nil))
	assert.Equal(t, http.StatusNotImplemented, rec.Code, "no Inspector: 501")
}
