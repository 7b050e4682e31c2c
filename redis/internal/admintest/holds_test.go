package admintest

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// eachDeployment runs fn on a standalone server and a Cluster.
func eachDeployment(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	t.Run("standalone", func(t *testing.T) { c, _ := redistest.Redis(t); fn(t, c) })
	t.Run("cluster", func(t *testing.T) { fn(t, redistest.RedisCluster(t, 3).Client) })
}

// withHost is info as a Locker fills it in: this host and pid.
func withHost(info mutex.OwnerInfo) mutex.OwnerInfo {
	info.Host, _ = os.Hostname()
	info.PID = os.Getpid()
	return info
}

// InspectSemaphore and InspectRWLock show each holder with its Locker's
// OwnerInfo, token and lease, and what is left once they release.
func TestInspectSemaphoreAndRWLock(t *testing.T) {
	eachDeployment(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		info := mutex.OwnerInfo{Service: "exporter", Label: "v2"}
		l := newLocker(t, c, mutex.WithOwnerInfo(info))
		viewer := viewerOf(t, c)

		s, err := mutex.NewSemaphore(l, "exports", 3, mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		p, err := s.Acquire(ctx)
		require.NoError(t, err)
		sem, err := viewer.InspectSemaphore(ctx, "exports")
		require.NoError(t, err)
		assert.Equal(t, "exports", sem.Key)
		assert.Equal(t, 3, sem.Limit)
		require.Len(t, sem.Holders, 1)
		assert.True(t, sem.Held())
		assert.Equal(t, withHost(info), sem.Holders[0].Info)
		assert.Equal(t, p.Token(), sem.Holders[0].Token)
		assert.Positive(t, sem.Holders[0].Lease)
		assert.LessOrEqual(t, sem.Holders[0].Lease, time.Minute)
		require.NoError(t, p.Release(ctx))
		sem, err = viewer.InspectSemaphore(ctx, "exports")
		require.NoError(t, err)
		assert.False(t, sem.Held())
		assert.Equal(t, 3, sem.Limit, "the limit stays stored")

		rw, err := mutex.NewRWMutex(l, "prices", mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		w, err := rw.Lock(ctx)
		require.NoError(t, err)
		got, err := viewer.InspectRWLock(ctx, "prices")
		require.NoError(t, err)
		require.NotNil(t, got.Writer)
		assert.Equal(t, withHost(info), got.Writer.Info)
		assert.Equal(t, w.Token(), got.Writer.Token)
		assert.Equal(t, w.Token(), got.LastWrite)
		assert.True(t, got.Held())
		require.NoError(t, w.Downgrade(ctx))
		got, err = viewer.InspectRWLock(ctx, "prices")
		require.NoError(t, err)
		assert.Nil(t, got.Writer)
		require.Len(t, got.Readers, 1)
		assert.Equal(t, withHost(info), got.Readers[0].Info)
		require.NoError(t, w.Release(ctx))
		got, err = viewer.InspectRWLock(ctx, "prices")
		require.NoError(t, err)
		assert.False(t, got.Held())
	})
}

// List shows, beside the locks, the semaphores with a permit held and the
// read-write locks with a hold, each holder with its OwnerInfo; with Free
// also those nobody holds; Match narrows them as it does locks.
func TestListShowsSemaphoresAndRWLocks(t *testing.T) {
	eachDeployment(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		info := mutex.OwnerInfo{Service: "exporter"}
		l := newLocker(t, c, mutex.WithOwnerInfo(info))
		viewer := viewerOf(t, c)
		lk, err := l.Lock(ctx, "jobs:1", mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		s, err := mutex.NewSemaphore(l, "jobs:pool", 2, mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		var tokens []int64
		for range 2 {
			p, err := s.Acquire(ctx)
			require.NoError(t, err)
			tokens = append(tokens, p.Token())
		}
		idle, err := mutex.NewSemaphore(l, "jobs:idle", 1, mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		p, err := idle.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, p.Release(ctx))
		rw, err := mutex.NewRWMutex(l, "jobs:config", mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		var readers []*mutex.RWHold
		for range 2 {
			r, err := rw.RLock(ctx)
			require.NoError(t, err)
			readers = append(readers, r)
		}

		all := func(o admin.ListOptions) admin.Page {
			var out admin.Page
			for {
				page, err := viewer.List(ctx, o)
				require.NoError(t, err)
				require.True(t, page.HoldsListed)
				out.Locks = append(out.Locks, page.Locks...)
				out.Semaphores = append(out.Semaphores, page.Semaphores...)
				out.RWLocks = append(out.RWLocks, page.RWLocks...)
				if page.Cursor == "" {
					return out
				}
				o.Cursor = page.Cursor
			}
		}
		got := all(admin.ListOptions{Match: "jobs:*"})
		assert.Equal(t, []string{"jobs:1"}, keysOf(got.Locks))
		assert.Equal(t, lk.Token(), got.Locks[0].Token)
		require.Len(t, got.Semaphores, 1, "the held semaphore, not the idle one: %+v", got.Semaphores)
		sem := got.Semaphores[0]
		assert.Equal(t, "jobs:pool", sem.Key)
		assert.Equal(t, 2, sem.Limit)
		require.Len(t, sem.Holders, 2)
		assert.ElementsMatch(t, tokens, []int64{sem.Holders[0].Token, sem.Holders[1].Token})
		for _, h := range sem.Holders {
			assert.Equal(t, withHost(info), h.Info)
		}
		require.Len(t, got.RWLocks, 1)
		assert.Equal(t, "jobs:config", got.RWLocks[0].Key)
		require.Len(t, got.RWLocks[0].Readers, 2)
		assert.Equal(t, withHost(info), got.RWLocks[0].Readers[1].Info)

		got = all(admin.ListOptions{Match: "jobs:*", Free: true})
		var keys []string
		for _, s := range got.Semaphores {
			keys = append(keys, s.Key)
		}
		assert.ElementsMatch(t, []string{"jobs:pool", "jobs:idle"}, keys, "Free adds the semaphore nobody holds")

		got = all(admin.ListOptions{Match: "other:*"})
		assert.Empty(t, got.Semaphores)
		assert.Empty(t, got.RWLocks)
		for _, r := range readers {
			require.NoError(t, r.Release(ctx))
		}
	})
}

// A store that keeps no semaphores or read-write locks (Redlock), or an
// outside backend that lists none, says so: InspectSemaphore and
// InspectRWLock fail with errors.ErrUnsupported, and a listing has
// HoldsListed false, which claims nothing. Bad input is refused first.
func TestHoldsWhereTheStoreKeepsNone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients, _ := redlockNodes(t, 3)
	red := adminOf(t, newRedlock(t, clients))
	_, err := red.InspectSemaphore(ctx, "k")
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = red.InspectRWLock(ctx, "k")
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	page, err := red.List(ctx, admin.ListOptions{})
	require.NoError(t, err)
	assert.False(t, page.HoldsListed)

	ext := adminOf(t, testutil.WithBackend(t, newMemory()))
	page, err = ext.List(ctx, admin.ListOptions{})
	require.NoError(t, err)
	assert.False(t, page.HoldsListed, "an Inspector without HoldLister")
	_, err = ext.InspectSemaphore(ctx, "k")
	assert.ErrorIs(t, err, errors.ErrUnsupported)

	c, _ := redistest.Redis(t)
	a := viewerOf(t, c)
	var nilAdmin *admin.Admin
	var nilCtx context.Context
	for name, call := range map[string]func() error{
		"semaphore empty key": func() error { _, err := a.InspectSemaphore(ctx, ""); return err },
		"semaphore nil ctx":   func() error { _, err := a.InspectSemaphore(nilCtx, "k"); return err },
		"semaphore nil Admin": func() error { _, err := nilAdmin.InspectSemaphore(ctx, "k"); return err },
		"rw key too long":     func() error { _, err := a.InspectRWLock(ctx, strings.Repeat("k", mutex.MaxKeyLen+1)); return err },
		"rw nil Admin":        func() error { _, err := nilAdmin.InspectRWLock(ctx, "k"); return err },
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, testutil.Safely(t, 5*time.Second, call), mutex.ErrInvalid)
		})
	}
}

// A lock taken with an explicit owner made by OwnerID shows its Locker's
// OwnerInfo, as a lock the Locker named itself does, in Inspect and List;
// SplitOwnerID gives the id back. Ids OwnerID did not make carry none.
func TestOwnerID(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info := mutex.OwnerInfo{Service: "scheduler", Label: "blue"}
	l := newLocker(t, c, mutex.WithOwnerInfo(info))
	viewer := viewerOf(t, c)
	owner := admin.OwnerID(l, "worker@7")
	require.True(t, strings.HasPrefix(owner, "worker@7@"), owner)
	lk, err := l.Lock(ctx, "cron", mutex.WithOwner(owner), mutex.WithTTL(time.Minute))
	require.NoError(t, err)

	in, err := viewer.Inspect(ctx, "cron")
	require.NoError(t, err)
	assert.Equal(t, owner, in.Owner)
	assert.Equal(t, withHost(info), in.Info)
	locks, err := viewer.ListAll(ctx, admin.ListOptions{Match: "cron"})
	require.NoError(t, err)
	require.Len(t, locks, 1)
	assert.Equal(t, withHost(info), locks[0].Info)

	id, got, ok := admin.SplitOwnerID(owner)
	assert.True(t, ok)
	assert.Equal(t, "worker@7", id)
	assert.Equal(t, withHost(info), got)
	for _, other := range []string{"alice@example.com", "job-7", "x@h=web-7", "x@p=seven"} {
		id, got, ok := admin.SplitOwnerID(other)
		assert.False(t, ok, other)
		assert.Equal(t, other, id, "it comes back whole")
		assert.Zero(t, got, other)
	}

	long := strings.Repeat("v", 500)
	assert.Equal(t, long, admin.OwnerID(l, long), "past 512 bytes the id goes without")
	assert.Equal(t, "x", admin.OwnerID(nil, "x"))
	require.NoError(t, lk.Release(ctx))

	plain, err := l.Lock(ctx, "cron", mutex.WithOwner("job-7"), mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	in, err = viewer.Inspect(ctx, "cron")
	require.NoError(t, err)
	assert.Zero(t, in.Info, "a WithOwner id of its own carries no OwnerInfo")
	require.NoError(t, plain.Release(ctx))
}
