package redisinspect_test

import (
	"context"
	"fmt"
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

// holdsListing is what a walk of ListHolds found, by user key.
type holdsListing struct {
	locks map[string]backend.KeyState
	sems  map[string]backend.SemaphoreState
	rws   map[string]backend.RWState
}

// listHolds walks a ListHolds listing page after page; a kind's key found
// twice in one page fails the test.
func listHolds(t *testing.T, ctx context.Context, in *redisinspect.Inspector, r backend.ListRequest) holdsListing {
	t.Helper()
	ls := holdsListing{map[string]backend.KeyState{}, map[string]backend.SemaphoreState{}, map[string]backend.RWState{}}
	for range 10000 {
		page, err := in.ListHolds(ctx, r)
		require.NoError(t, err)
		require.Empty(t, page.Skipped)
		pageSems, pageRWs := map[string]bool{}, map[string]bool{}
		for _, st := range page.Keys {
			ls.locks[st.Key] = st
		}
		for _, s := range page.Semaphores {
			require.False(t, pageSems[s.Key], "semaphore %q twice in one page", s.Key)
			pageSems[s.Key] = true
			ls.sems[s.Key] = s.SemaphoreState
		}
		for _, rw := range page.RWLocks {
			require.False(t, pageRWs[rw.Key], "read-write lock %q twice in one page", rw.Key)
			pageRWs[rw.Key] = true
			ls.rws[rw.Key] = rw.RWState
		}
		if page.Cursor == "" {
			return ls
		}
		r.Cursor = page.Cursor
	}
	t.Fatal("the listing never ended")
	return ls
}

// permit takes a permit of semaphore k for owner with the real script.
func permit(t *testing.T, ctx context.Context, c redis.Scripter, k, owner string, limit int) int64 {
	t.Helper()
	reply, err := redisproto.SemAcquireScript.Run(ctx, c, redisproto.SemaphoreKeys(name(k)), owner, 60000, limit, 3600000).Slice()
	require.NoError(t, err)
	require.Equal(t, int64(1), reply[0], "no permit of %s for %s", k, owner)
	var tok int64
	_, err = fmt.Sscan(reply[1].(string), &tok)
	require.NoError(t, err)
	return tok
}

// rwAttempt makes one attempt at read-write lock k for owner ("r" or "w"),
// waiting (a refused write marks a waiting writer) when queue; it reports
// whether it was granted.
func rwAttempt(t *testing.T, ctx context.Context, c redis.Scripter, k, owner, mode string, queue bool) bool {
	t.Helper()
	q := "0"
	if queue {
		q = "1"
	}
	reply, err := redisproto.RWAcquireScript.Run(ctx, c, redisproto.RWKeys(name(k)), owner, 60000, mode, q, 3600000).Slice()
	require.NoError(t, err)
	return reply[0] == int64(1)
}

// ListHolds finds the semaphores and read-write locks beside the locks,
// each once however many of its keys a page meets: a semaphore with
// holders, a read-write lock held by readers alone (no meta hash), one held
// for writing, one that only a waiting writer's mark keeps; held or not, a
// Cluster's on every master. Keys of another type under a lock's or a
// semaphore's name are passed over, and List finds none of the
// semaphores and read-write locks.
func TestListHoldsFindsSemaphoresAndRWLocks(t *testing.T) {
	for _, d := range []struct {
		name string
		in   func(t *testing.T) (redis.UniversalClient, *redisinspect.Inspector)
	}{
		{"standalone", func(t *testing.T) (redis.UniversalClient, *redisinspect.Inspector) {
			c, _ := redistest.Redis(t)
			return c, newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}})
		}},
		{"cluster", func(t *testing.T) (redis.UniversalClient, *redisinspect.Inspector) {
			cl := redistest.RedisCluster(t, 3)
			return cl.Client, newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{cl.Client}, Publish: "SPUBLISH"})
		}},
	} {
		t.Run(d.name, func(t *testing.T) {
			ctx := testCtx(t)
			c, in := d.in(t)
			lockTok := acquire(t, ctx, c, "jobs", "owner-L", time.Minute, "")
			sems := map[string][]int64{}
			for i := range 12 {
				k := fmt.Sprintf("pool:%d", i)
				sems[k] = append(sems[k], permit(t, ctx, c, k, "owner-A", 3), permit(t, ctx, c, k, "owner-B", 3))
			}
			permit(t, ctx, c, "odd{brace}", "owner-A", 1)
			require.True(t, rwAttempt(t, ctx, c, "readers", "reader-1", "r", false))
			require.True(t, rwAttempt(t, ctx, c, "readers", "reader-2", "r", false))
			require.True(t, rwAttempt(t, ctx, c, "written", "writer-1", "w", false))
			require.True(t, rwAttempt(t, ctx, c, "queued", "reader-1", "r", false))
			require.False(t, rwAttempt(t, ctx, c, "queued", "writer-2", "w", true), "a write waits for the reader")
			require.NoError(t, c.HSet(ctx, name("a-hash"), "f", "v").Err())
			require.NoError(t, c.Set(ctx, redisproto.SemaphoreKeys(name("a-string"))[0], "x", time.Hour).Err())

			ls := listHolds(t, ctx, in, backend.ListRequest{Count: 5, Scans: 2})
			assert.Equal(t, []string{"jobs"}, keysOf(ls.locks), "the lock, and no key of another type under a lock's name")
			assert.Equal(t, lockTok, ls.locks["jobs"].Token)
			require.Len(t, ls.sems, 13, "every semaphore once, and no string under a semaphore's name")
			for k, toks := range sems {
				s := ls.sems[k]
				assert.Equal(t, 3, s.Limit, k)
				require.Len(t, s.Holders, 2, k)
				assert.ElementsMatch(t, []string{"owner-A", "owner-B"}, []string{s.Holders[0].Owner, s.Holders[1].Owner}, k)
				assert.ElementsMatch(t, toks, []int64{s.Holders[0].Token, s.Holders[1].Token}, k)
				assert.Positive(t, s.Holders[0].Left, k)
			}
			assert.Len(t, ls.sems["odd{brace}"].Holders, 1, "a key with braces, tagged by its hash")
			require.Len(t, ls.rws, 3)
			assert.Nil(t, ls.rws["readers"].Writer)
			assert.Len(t, ls.rws["readers"].Readers, 2, "readers alone, found by their sorted set")
			require.NotNil(t, ls.rws["written"].Writer)
			assert.Equal(t, "writer-1", ls.rws["written"].Writer.Owner)
			assert.Equal(t, 1, ls.rws["queued"].Waiting)

			page, err := in.List(ctx, backend.ListRequest{Count: 1000, Scans: 100})
			require.NoError(t, err)
			assert.Empty(t, page.Semaphores, "List shows locks alone")
			assert.Empty(t, page.RWLocks)

			page, err = in.ListHolds(ctx, backend.ListRequest{Match: "pool:1*", Count: 1000, Scans: 100})
			require.NoError(t, err)
			var got []string
			for _, s := range page.Semaphores {
				got = append(got, s.Key)
			}
			assert.ElementsMatch(t, []string{"pool:1", "pool:10", "pool:11"}, got, "Match applies to semaphores")
			assert.Empty(t, page.Keys)
			assert.Empty(t, page.RWLocks)
		})
	}
}

// A page's Limit counts semaphores with locks: a listing cut at one key
// stops after the SCAN that found one.
func TestListHoldsLimitCountsSemaphores(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}})
	for i := range 50 {
		permit(t, ctx, c, fmt.Sprintf("pool:%d", i), "owner-A", 1)
	}
	page, err := in.ListHolds(ctx, backend.ListRequest{Count: 1, Scans: 1000, Limit: 1})
	require.NoError(t, err)
	assert.NotEmpty(t, page.Semaphores)
	assert.NotEmpty(t, page.Cursor, "it stopped before the end")
	assert.Less(t, page.RoundTrips, 100, "it stopped at the first semaphore's SCAN, not after every key")
}

// Redlock keeps no semaphores: its ListHolds is List, the locks alone, a
// hash under a lock's name on every node passed over.
func TestListHoldsRedlockIsList(t *testing.T) {
	clients, addrs, _ := nodes(t, 3)
	ctx := testCtx(t)
	in := newInspector(t, redisinspect.Config{Servers: clients, Addrs: addrs, Quorum: 2})
	for _, c := range clients {
		acquire(t, ctx, c, "jobs", "owner-A", time.Minute, proposal())
		require.NoError(t, c.HSet(ctx, name("a-hash"), "f", "v").Err())
	}
	ls := listHolds(t, ctx, in, backend.ListRequest{})
	assert.Equal(t, []string{"jobs"}, keysOf(ls.locks))
	assert.Empty(t, ls.sems)
	assert.Empty(t, ls.rws)
}

func keysOf[T any](m map[string]T) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
