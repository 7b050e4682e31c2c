package mutextest

import (
	"context"
	"slices"
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

// clusterLocker is a Locker on a Cluster client of its own, as another
// process's: it has loaded the slot map before the test breaks anything.
// The client's ReadTimeout is 1 s: go-redis's reload of the slot map asks
// the nodes in a random order, and waits that long on the hung one when it
// asks it first.
func clusterLocker(t *testing.T, cl *redistest.Cluster) *mutex.Locker {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{cl.Masters[0].Addr()},
		DialTimeout: time.Second, ReadTimeout: time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() }))
	return redistest.Locker(t, c)
}

// masterOf is the index of the master that holds key's lock.
func masterOf(t *testing.T, cl *redistest.Cluster, key string) int {
	t.Helper()
	m, err := cl.Client.MasterForKey(context.Background(), "{"+key+"}")
	require.NoError(t, err)
	i := slices.IndexFunc(cl.Masters, func(s *redistest.RedisServer) bool { return s.Addr() == m.Options().Addr })
	require.NotEqual(t, -1, i)
	return i
}

// tryUntil makes TryLock attempts of 250 ms each, as a caller retrying
// would, until one gets the lock or an answer that wanted says is enough,
// or the bound passes; it returns the last attempt's lock and error.
func tryUntil(l *mutex.Locker, key string, bound time.Duration, wanted func(error) bool) (*mutex.Lock, error) {
	end := time.Now().Add(bound)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		lk, err := l.TryLock(ctx, key)
		cancel()
		if err == nil || wanted(err) || time.Now().After(end) {
			return lk, err
		}
	}
}

// TestClusterFailoverBehindAHungMaster: a lock is held on a Cluster, its
// slot's master hangs (SIGSTOP) and its replica takes over. go-redis moves
// a client to the new master on a MOVED reply, which a hung master never
// sends, or at its periodic reload (a minute): the Locker reloads the slot
// map itself after a call that got no answer. Within 5 s of the promotion
// (widened by the lateness measured) the next Locker gets the key, with a
// larger token, and the old holder's context had ended by then: its lease
// ran out, renewed or not (a renewal on the hung master waits until the
// lease's deadline).
func TestClusterFailoverBehindAHungMaster(t *testing.T) {
	for _, tc := range []struct {
		name  string
		ttl   time.Duration
		renew bool
	}{
		{"not renewed", time.Second, false},
		{"renewed", 2 * time.Second, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := redistest.RedisCluster(t, 3, redistest.WithReplicas(1))
			la, lb := clusterLocker(t, cl), clusterLocker(t, cl)
			ctx := context.Background()
			key := "failover:" + tc.name
			a, err := la.Lock(ctx, key, mutex.WithTTL(tc.ttl), mutex.WithAutoRenew(tc.renew),
				mutex.WithReplicaAck(1, time.Second)) // the replica has it
			require.NoError(t, err)
			_, err = lb.TryLock(ctx, key) // B's client knows the slot's master
			require.ErrorIs(t, err, mutex.ErrNotAcquired)
			viewer, err := admin.New(clusterLocker(t, cl))
			require.NoError(t, err)
			_, err = viewer.Inspect(ctx, key) // and so does the viewer's
			require.NoError(t, err)

			m := masterOf(t, cl, key)
			cl.Masters[m].Pause()
			cl.Promote(t, m)
			late := testutil.MeasureLateness(t)
			promoted := time.Now()
			b, err := tryUntil(lb, key, 15*time.Second, func(error) bool { return false })
			took := time.Since(promoted)
			aEnded := a.Context().Err() != nil
			late.Stop()
			require.NoError(t, err, "B never got the key (%v after the promotion)", took)
			t.Logf("B got the key %v after the promotion", took)
			assert.Less(t, took, late.Bound(5*time.Second), "B got the key too late")
			assert.Greater(t, b.Token(), a.Token(), "tokens increase across the failover")
			assert.True(t, aEnded, "B got the key while A's context was alive")
			assert.ErrorIs(t, context.Cause(a.Context()), mutex.ErrLockLost)

			// Inspection, too, reloads the slot map after no answer.
			asked := time.Now()
			var in admin.LockInfo
			for {
				ictx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
				in, err = viewer.Inspect(ictx, key)
				cancel()
				if err == nil || time.Since(asked) > 15*time.Second {
					break
				}
			}
			require.NoError(t, err, "the viewer never reached the new master")
			assert.Less(t, time.Since(asked), late.Bound(5*time.Second), "the viewer reached the new master too late")
			assert.Equal(t, b.Token(), in.Token, "the viewer sees B's lock")
			require.NoError(t, b.Release(ctx))
		})
	}
}
