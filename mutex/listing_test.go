package mutex_test

import (
	"context"
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
	lk, err := newRedlock(t, clients).Lock(ctx, "batch", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	waitHeldEverywhere(t, ctx, clients, "redfence:{batch}")
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
