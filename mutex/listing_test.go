package mutex_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// A Redlock listing that fewer than a quorum of nodes answer is an error,
// never "no locks"; one that a quorum answers, but not every node, returns
// what it found and says it is partial.
func TestRedlockListingNeedsAQuorum(t *testing.T) {
	clients, srvs := redlockNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk := lockEverywhere(t, ctx, clients, "batch")
	viewer := newRedlock(t, clients)

	locks, err := viewer.ListAll(ctx, mutex.ListOptions{})
	require.NoError(t, err, "every node answered: a whole listing")
	require.Len(t, locks, 1)

	srvs[2].Kill()
	locks, err = viewer.ListAll(ctx, mutex.ListOptions{})
	assert.ErrorIs(t, err, mutex.ErrPartial)
	assert.NotErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorContains(t, err, srvs[2].Addr())
	require.Len(t, locks, 1, "what the majority holds is found")
	assert.Equal(t, lk.Token(), locks[0].Token)

	for _, tc := range []struct {
		kill     int
		answered string
	}{{1, "1 of 3 nodes answered, 2 needed"}, {0, "0 of 3 nodes answered, 2 needed"}} {
		srvs[tc.kill].Kill()
		locks, err = viewer.ListAll(ctx, mutex.ListOptions{})
		assert.ErrorIs(t, err, mutex.ErrUnavailable, tc.answered)
		assert.ErrorContains(t, err, tc.answered)
		assert.Empty(t, locks)
		for cursor := ""; ; {
			// No page of the listing is an empty answer.
			page, err := viewer.List(ctx, mutex.ListOptions{Cursor: cursor, Scans: 1})
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
func TestRedlockListingAfterASkippedNode(t *testing.T) {
	_, rest := testutil.RedisN(t, 2)
	srvs := append([]*testutil.RedisServer{testutil.StartRedis(t, testutil.WithRedisArgs("--rename-command", "SCAN", "SCAN-hidden"))}, rest...)
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
	locks, err := newRedlock(t, clients).ListAll(ctx, mutex.ListOptions{})
	assert.ErrorIs(t, err, mutex.ErrPartial)
	assert.ErrorContains(t, err, "scan node 0")
	require.Len(t, locks, 1)
	assert.Equal(t, lk.Token(), locks[0].Token)
}

// Inspection reads with read-only scripts: a server whose writes are paused
// (CLIENT PAUSE WRITE, as during a failover) still answers them.
func TestInspectDuringWritePause(t *testing.T) {
	c, _ := testutil.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk, err := newLocker(t, c).Lock(ctx, "acct:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	viewer := newLocker(t, c)
	_, err = viewer.Inspect(ctx, "acct:1") // the script is loaded before the pause
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err())
	t.Cleanup(func() { _ = c.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })

	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	in, err := viewer.Inspect(short, "acct:1")
	require.NoError(t, err)
	assert.Equal(t, mutex.Held, in.State)
	assert.Equal(t, lk.Token(), in.Token)
	locks, err := viewer.ListAll(short, mutex.ListOptions{})
	require.NoError(t, err)
	require.Len(t, locks, 1)
	assert.Equal(t, "acct:1", locks[0].Key)
}

// waitHeldEverywhere waits until every Redlock node has the lock key:
// Lock returns at the quorum, and the last node may still be granting.
func waitHeldEverywhere(t *testing.T, ctx context.Context, nodes []redis.UniversalClient, name string) {
	t.Helper()
	waitFor(t, ctx, "every node holds "+name, func() bool {
		for _, c := range nodes {
			if c.Exists(ctx, name).Val() != 1 {
				return false
			}
		}
		return true
	})
}

// Inspection returns when its ctx is cancelled, also with a client that
// applies ctx deadlines to its sockets (which stops reading at a deadline,
// not at a cancellation): an operator's Ctrl-C is not held by a hung server.
func TestInspectionReturnsWhenCancelled(t *testing.T) {
	addr, accepted := testutil.HungServer(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	l := mutex.New(c)
	t.Cleanup(func() {
		_ = c.Close() // first: the abandoned calls end, and Close does not wait for them
		assert.NoError(t, l.Close())
	})
	for name, call := range map[string]func(ctx context.Context) error{
		"Inspect": func(ctx context.Context) error { _, err := l.Inspect(ctx, "k"); return err },
		"List":    func(ctx context.Context) error { _, err := l.List(ctx, mutex.ListOptions{}); return err },
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			late := testutil.MeasureLateness(t)
			var cancelled time.Time
			go func() {
				<-accepted // the call waits on the server
				cancelled = time.Now()
				cancel()
			}()
			err := call(ctx)
			took := time.Since(cancelled)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Less(t, took, late.Bound(100*time.Millisecond))
		})
	}
}

// A Redlock node that hangs is skipped within the page's deadline: the
// listing goes on with the others and says it is partial, and Inspect
// answers from the majority.
func TestRedlockListingSkipsAHungNode(t *testing.T) {
	clients, srvs := redlockNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk := lockEverywhere(t, ctx, clients, "batch")
	viewer := newRedlock(t, clients)
	_, err := viewer.ListAll(ctx, mutex.ListOptions{}) // connections made before the pause
	require.NoError(t, err)
	srvs[0].Pause()
	t.Cleanup(srvs[0].Resume)

	page, err := func() (mutex.Page, error) {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		return viewer.List(ctx, mutex.ListOptions{})
	}()
	require.NoError(t, err, "a majority answered")
	require.Len(t, page.Locks, 1)
	assert.Equal(t, lk.Token(), page.Locks[0].Token)
	require.NotEmpty(t, page.Skipped)
	assert.ErrorContains(t, page.Skipped[0], "scan node 0")
}

// A Redlock key that the answering nodes cannot call held or free (one
// holds it, one does not, and one did not answer) is an outage, not a
// free key.
func TestRedlockInspectCannotTell(t *testing.T) {
	clients, srvs := redlockNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lockEverywhere(t, ctx, clients, "batch")
	require.NoError(t, clients[1].Del(ctx, "redfence:{batch}").Err()) // held on nodes 0 and 2
	srvs[2].Kill()
	viewer := newRedlock(t, clients)
	in, err := viewer.Inspect(ctx, "batch")
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorContains(t, err, "cannot tell whether a majority holds")
	assert.Equal(t, mutex.Held, in.Nodes[0].Info.State, "each node's view is still there")
	assert.Equal(t, mutex.Free, in.State, "undecided is not held")
	assert.Equal(t, in.Nodes[0].Info.Token, in.Token, "the highest token the nodes remember")
	assert.False(t, in.ServerTime.IsZero())
	_, err = viewer.ForceRelease(ctx, "batch", mutex.ForceOptions{Reason: "r"})
	assert.ErrorIs(t, err, mutex.ErrUnavailable, "not 'nobody holds it'")
}

// One server whose read fails is an outage, in the listing too; a server
// without EVALSHA_RO is read with EVALSHA.
func TestListingReadFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, srv := testutil.Redis(t, testutil.WithRedisArgs("--rename-command", "EVALSHA_RO", "EVALSHA_RO_hidden"))
	_, err := newLocker(t, c).Lock(ctx, "acct:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	viewer := newLocker(t, c)
	in, err := viewer.Inspect(ctx, "acct:1")
	require.NoError(t, err, "EVALSHA when EVALSHA_RO is unknown")
	assert.Equal(t, mutex.Held, in.State)
	locks, err := viewer.ListAll(ctx, mutex.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, locks, 1)

	// A user that may SCAN but not run scripts: the read fails.
	require.NoError(t, c.Do(ctx, "ACL", "SETUSER", "viewer", "on", ">pw", "~*", "+@all", "-@scripting").Err())
	vc := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "viewer", Password: "pw"})
	t.Cleanup(func() { _ = vc.Close() })
	_, err = newLocker(t, vc).List(ctx, mutex.ListOptions{})
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorContains(t, err, "NOPERM")
}

// A parsed cursor costs what its text costs, whatever numbers it holds.
func TestListCursorIsCheap(t *testing.T) {
	c, _ := testutil.Redis(t)
	l := newLocker(t, c)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := l.List(context.Background(), mutex.ListOptions{Cursor: "2000000000:0:1999999999:x"})
	runtime.ReadMemStats(&after)
	assert.ErrorIs(t, err, mutex.ErrInvalid)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20))
	for _, bad := range []string{"3:0:2.1:x", "3:0:1.1:x", "1:0:1:x", "0:0:-1:x", "1:0:0.:x"} {
		_, err := l.List(context.Background(), mutex.ListOptions{Cursor: bad})
		assert.ErrorIs(t, err, mutex.ErrInvalid, bad)
	}
}

// A Cluster client that routes reads to replicas is inspected with EVALSHA,
// which goes to the key's master: a replica may not have the lock yet.
func TestInspectionReadsMasters(t *testing.T) {
	for _, o := range []redis.ClusterOptions{{ReadOnly: true}, {RouteByLatency: true}, {RouteRandomly: true}} {
		c := redis.NewClusterClient(&o)
		assert.True(t, mutex.ReadsReplicas(c), "%+v", o)
		_ = c.Close()
	}
	c := redis.NewClusterClient(&redis.ClusterOptions{})
	assert.False(t, mutex.ReadsReplicas(c))
	_ = c.Close()
}

// lockEverywhere takes key on the Redlock nodes for a minute and waits
// until every node holds it.
func lockEverywhere(t *testing.T, ctx context.Context, nodes []redis.UniversalClient, key string) *mutex.Lock {
	t.Helper()
	lk, err := newRedlock(t, nodes).Lock(ctx, key, mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	waitHeldEverywhere(t, ctx, nodes, "redfence:{"+key+"}")
	return lk
}
