package admintest

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/hostlink"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redisdriver"
)

// A held lock is seen with its owner's info, token, times, lease and the
// Lockers queued behind it; a freed one as free with its last token.
func TestInspectHeldLock(t *testing.T) {
	host, _ := os.Hostname()
	eachInspectable(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		holder := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing", Label: "canary 7"}))
		waiter := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "reports", Host: "box-2", PID: 42}))
		viewer := viewerOf(t, c)

		in, err := viewer.Inspect(ctx, "acct:1")
		require.NoError(t, err)
		assert.Equal(t, admin.Free, in.State)
		assert.Zero(t, in.Token, "a key never locked has no token")

		lk, err := holder.Lock(ctx, "acct:1", mutex.WithTTL(20*time.Second))
		require.NoError(t, err)
		in, err = viewer.Inspect(ctx, "acct:1")
		require.NoError(t, err)
		assert.Equal(t, admin.Held, in.State)
		assert.Equal(t, "acct:1", in.Key)
		assert.Equal(t, redisproto.LockKey(redisproto.DefaultPrefix, "acct:1"), in.Name, "the Redis key, under the driver's prefix")
		assert.Equal(t, lk.Token(), in.Token)
		assert.Equal(t, mutex.OwnerInfo{Service: "billing", Host: host, PID: os.Getpid(), Label: "canary 7"}, in.Info)
		assert.Equal(t, 1, in.Count)
		assert.Equal(t, time.UnixMicro(lk.Token()), in.AcquiredAt, "the token is the server time of the acquisition")
		assert.False(t, in.RenewedAt.Before(in.AcquiredAt))
		assert.Greater(t, in.Lease, time.Duration(0))
		assert.LessOrEqual(t, in.Lease, 20*time.Second)
		assert.False(t, in.ServerTime.Before(in.RenewedAt))
		assert.False(t, in.Waited)
		assert.Empty(t, in.Waiters)

		got := make(chan error, 1)
		go func() {
			wl, err := waiter.Lock(ctx, "acct:1")
			if err == nil {
				err = wl.Release(ctx)
			}
			got <- err
		}()
		waitFor(t, ctx, "the waiter never showed in the queue", func() bool {
			in, err = viewer.Inspect(ctx, "acct:1")
			require.NoError(t, err)
			return len(in.Waiters) > 0
		})
		assert.True(t, in.Waited)
		require.Len(t, in.Waiters, 1)
		w := in.Waiters[0]
		assert.Equal(t, hostlink.ID(waiter), w.Locker)
		assert.Equal(t, mutex.OwnerInfo{Service: "reports", Host: "box-2", PID: 42}, w.Info)
		assert.False(t, w.Since.After(in.ServerTime))
		assert.Equal(t, in.ServerTime.Sub(w.Since), w.Waited)

		require.NoError(t, lk.Release(ctx))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("the waiter never got the lock")
		}
		in, err = viewer.Inspect(ctx, "acct:1")
		require.NoError(t, err)
		assert.Equal(t, admin.Free, in.State)
		assert.Greater(t, in.Token, lk.Token(), "a freed key shows the last token issued")
		assert.Empty(t, in.Owner)
	})
}

// Inspection names keys as the Locker's caller does and reads them under
// its driver's prefix: a viewer over a driver of another prefix sees the
// key free, one of the same prefix sees it held.
func TestInspectUnderTheDriversPrefix(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	lk, err := newLocker(t, c, redisdriver.WithPrefix("billing:")).Lock(ctx, "acct:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	in, err := viewerOf(t, c, redisdriver.WithPrefix("billing:")).Inspect(ctx, "acct:1")
	require.NoError(t, err)
	assert.Equal(t, admin.Held, in.State)
	assert.Equal(t, "acct:1", in.Key)
	assert.Equal(t, "billing:{acct:1}", in.Name)
	assert.Equal(t, lk.Token(), in.Token)
	in, err = viewerOf(t, c).Inspect(ctx, "acct:1")
	require.NoError(t, err)
	assert.Equal(t, admin.Free, in.State, "another prefix is another namespace")
	assert.Zero(t, in.Token)
}

// A WithOwner lock shows its caller's id as it is, with its Redis count,
// and no OwnerInfo; braces in a key do not hide it.
func TestInspectOwnerAndCount(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	l := newLocker(t, c)
	for range 2 {
		lk, err := l.TryLock(ctx, "{job}:7", mutex.WithOwner("worker@host-9"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = lk.Release(ctx) })
	}
	in, err := viewerOf(t, c).Inspect(ctx, "{job}:7")
	require.NoError(t, err)
	assert.Equal(t, admin.Held, in.State)
	assert.Equal(t, "worker@host-9", in.Owner)
	assert.Equal(t, mutex.OwnerInfo{}, in.Info)
	assert.Equal(t, 2, in.Count)
	assert.Equal(t, "{job}:7", in.Key)
}

// Redlock: the quorum's view with each node's, a minority holder is not a
// holder, the listing shows each key once, and a forced release ends the
// quorum's holder.
func TestInspectRedlock(t *testing.T) {
	clients, srvs := redlockNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rl := newRedlock(t, clients, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "nightly"}))
	lk, err := rl.Lock(ctx, "batch", mutex.WithTTL(3*time.Second))
	require.NoError(t, err)
	viewer := adminOf(t, newRedlock(t, clients))
	in, err := viewer.Inspect(ctx, "batch")
	require.NoError(t, err)
	assert.Equal(t, admin.Held, in.State)
	assert.Equal(t, lk.Token(), in.Token)
	assert.Equal(t, "nightly", in.Info.Service)
	require.Len(t, in.Nodes, 3)
	held := 0
	for _, n := range in.Nodes {
		require.NoError(t, n.Err)
		if n.Info.State == admin.Held {
			held++ // (Lock returns at the quorum: the last node may still be granting)
		}
		assert.Equal(t, srvs[n.Node].Addr(), n.Addr)
	}
	assert.GreaterOrEqual(t, held, 2)

	// A lock on one node alone is nobody's.
	solo := newLocker(t, clients[0])
	sl, err := solo.TryLock(ctx, "minority")
	require.NoError(t, err)
	defer sl.Release(ctx)
	in, err = viewer.Inspect(ctx, "minority")
	require.NoError(t, err)
	assert.Equal(t, admin.Free, in.State)
	assert.Equal(t, admin.Held, in.Nodes[0].Info.State)

	locks, err := viewer.ListAll(ctx, admin.ListOptions{})
	require.NoError(t, err)
	require.Len(t, locks, 1, "each key once, and the minority's not at all")
	assert.Equal(t, "batch", locks[0].Key)

	srvs[2].Kill()
	in, err = viewer.Inspect(ctx, "batch")
	require.NoError(t, err, "a majority answers")
	assert.Equal(t, admin.Held, in.State)
	assert.Error(t, in.Nodes[2].Err)
	page, err := viewer.List(ctx, admin.ListOptions{Scans: 10})
	require.NoError(t, err, "a majority answers the listing too")
	require.Len(t, page.Locks, 1)
	assert.Equal(t, "batch", page.Locks[0].Key)
	require.NotEmpty(t, page.Skipped, "the dead node is named")
	assert.ErrorContains(t, page.Skipped[0], "scan node 2")
	assert.WithinDuration(t, time.UnixMicro(lk.Token()).Add(-100*time.Millisecond), in.AcquiredAt, 0, "read from the proposal")

	res, err := viewer.ForceRelease(ctx, "batch", admin.ForceOptions{Reason: "drill"})
	require.NoError(t, err)
	assert.Equal(t, lk.Token(), res.Token)
	assert.Equal(t, 2, res.Released)
	select {
	case <-lk.Context().Done():
		assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	case <-ctx.Done():
		t.Fatal("the Redlock holder never learnt it lost the lock")
	}
	in, err = viewer.Inspect(ctx, "batch")
	require.NoError(t, err)
	require.Len(t, in.Forced, 1, "the audit entry of both nodes that freed it, once")
	assert.Equal(t, "drill", in.Forced[0].Reason)
	nl, err := rl.TryLock(ctx, "batch")
	require.NoError(t, err)
	assert.Greater(t, nl.Token(), res.Floor)

	srvs[1].Kill() // a quorum's outcome unknown: the holder may keep it
	_, err = viewer.ForceRelease(ctx, "batch", admin.ForceOptions{Token: nl.Token(), Reason: "drill"})
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.NotErrorIs(t, err, mutex.ErrNotHeld)
}

// A Redlock key that the answering nodes cannot call held or free (one
// holds it, one does not, and one did not answer) is an outage, not a
// free key.
func TestInspectRedlockCannotTell(t *testing.T) {
	clients, srvs := redlockNodes(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lockEverywhere(t, ctx, clients, "batch")
	require.NoError(t, clients[1].Del(ctx, "redfence:{batch}").Err()) // held on nodes 0 and 2
	srvs[2].Kill()
	viewer := adminOf(t, newRedlock(t, clients))
	in, err := viewer.Inspect(ctx, "batch")
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorContains(t, err, "cannot tell whether a majority holds")
	assert.Equal(t, admin.Held, in.Nodes[0].Info.State, "each node's view is still there")
	assert.Equal(t, admin.Free, in.State, "undecided is not held")
	assert.Equal(t, in.Nodes[0].Info.Token, in.Token, "the highest token the nodes remember")
	assert.False(t, in.ServerTime.IsZero())
	_, err = viewer.ForceRelease(ctx, "batch", admin.ForceOptions{Reason: "r"})
	assert.ErrorIs(t, err, mutex.ErrUnavailable, "not 'nobody holds it'")
}

// A server that does not answer within the caller's deadline is an
// outcome unknown, never an answer: not a free key, not "nobody holds it",
// not an empty listing; with a client that does not apply deadlines itself.
func TestInspectHungServer(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testutil.SilentServer(t), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	a := viewerOf(t, c)
	for name, call := range map[string]func(ctx context.Context) error{
		"Inspect": func(ctx context.Context) error { _, err := a.Inspect(ctx, "k"); return err },
		"List":    func(ctx context.Context) error { _, err := a.List(ctx, admin.ListOptions{}); return err },
		"ListAll": func(ctx context.Context) error { _, err := a.ListAll(ctx, admin.ListOptions{}); return err },
		"ForceRelease": func(ctx context.Context) error {
			_, err := a.ForceRelease(ctx, "k", admin.ForceOptions{Reason: "r"})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := call(ctx)
			assert.ErrorIs(t, err, mutex.ErrUnavailable)
			assert.NotErrorIs(t, err, mutex.ErrNotHeld)
		})
	}
}

// Inspection reads with read-only scripts: a server whose writes are paused
// (CLIENT PAUSE WRITE, as during a failover) still answers them.
func TestInspectDuringWritePause(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk, err := newLocker(t, c).Lock(ctx, "acct:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	viewer := viewerOf(t, c)
	_, err = viewer.Inspect(ctx, "acct:1") // the script is loaded before the pause
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err())
	t.Cleanup(func() { _ = c.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })

	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	in, err := viewer.Inspect(short, "acct:1")
	require.NoError(t, err)
	assert.Equal(t, admin.Held, in.State)
	assert.Equal(t, lk.Token(), in.Token)
	locks, err := viewer.ListAll(short, admin.ListOptions{})
	require.NoError(t, err)
	require.Len(t, locks, 1)
	assert.Equal(t, "acct:1", locks[0].Key)
}

// Inspection returns when its ctx is cancelled, also with a client that
// applies ctx deadlines to its sockets (which stops reading at a deadline,
// not at a cancellation): an operator's Ctrl-C is not held by a hung server.
func TestInspectReturnsWhenCancelled(t *testing.T) {
	addr, accepted := testutil.HungServer(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
	l, err := redistest.NewLocker(c)
	require.NoError(t, err)
	t.Cleanup(func() {
		_ = c.Close() // first: the abandoned calls end, and Close does not wait for them
		assert.NoError(t, l.Close())
	})
	a := adminOf(t, l)
	for name, call := range map[string]func(ctx context.Context) error{
		"Inspect": func(ctx context.Context) error { _, err := a.Inspect(ctx, "k"); return err },
		"List":    func(ctx context.Context) error { _, err := a.List(ctx, admin.ListOptions{}); return err },
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

// Inspect over an outside backend: the holder's token, owner (with the
// OwnerInfo read back from its id), count and lease; a free key; and a
// backend without backend.Inspector says it cannot.
func TestInspectOverABackend(t *testing.T) {
	m := newMemory()
	a := testutil.WithBackend(t, m, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing", Label: "v2"}))
	b := adminOf(t, testutil.WithBackend(t, m))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lk, err := a.Lock(ctx, "i", mutex.WithTTL(time.Hour))
	require.NoError(t, err)
	in, err := b.Inspect(ctx, "i")
	require.NoError(t, err)
	assert.Equal(t, admin.Held, in.State)
	assert.Equal(t, "i", in.Key)
	assert.Equal(t, "i", in.Name, "the key reaches the backend as given: it names it so")
	assert.Equal(t, lk.Token(), in.Token)
	assert.Equal(t, 1, in.Count)
	assert.Equal(t, "billing", in.Info.Service)
	assert.Equal(t, "v2", in.Info.Label)
	assert.Positive(t, in.Lease)
	assert.LessOrEqual(t, in.Lease, time.Hour)
	assert.False(t, in.AcquiredAt.IsZero())

	require.NoError(t, lk.Release(ctx))
	in, err = b.Inspect(ctx, "i")
	require.NoError(t, err)
	assert.Equal(t, admin.Free, in.State)
	assert.Empty(t, in.Owner)

	_, err = adminOf(t, testutil.WithBackend(t, plain{newMemory()})).Inspect(ctx, "i")
	assert.ErrorIs(t, err, errors.ErrUnsupported, "no Inspector: the fallback")
}
