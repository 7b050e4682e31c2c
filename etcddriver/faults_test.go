package etcddriver_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/mutex/backend"
)

// Faults, each on a cluster of its own.

// cycle locks and unlocks key on l and returns the token, which must
// exceed last.
func cycle(ctx context.Context, t *testing.T, l *mutex.Locker, key string, last int64) int64 {
	t.Helper()
	lk, err := l.Lock(ctx, key)
	require.NoError(t, err)
	require.Greater(t, lk.Token(), last, "tokens increase")
	require.NoError(t, lk.Release(ctx))
	return lk.Token()
}

// Tokens increase across the leader's death and its restart: a token is a
// revision of the cluster's log, not of a member. A lock held throughout is
// renewed through the election, and a client of the restarted member alone
// is granted a later token too.
func TestTokensIncreaseAfterLeaderKilledAndRestarted(t *testing.T) {
	c := etcdtest.StartCluster(t, 3)
	l, _, _ := locker(t, c)
	ctx := testCtx(t)
	held, err := l.Lock(ctx, "held", mutex.WithTTL(5*time.Second))
	require.NoError(t, err)
	last := cycle(ctx, t, l, "k", held.Token())

	old := c.KillLeader(t)
	require.NotSame(t, old, c.Leader(t), "another member leads")
	last = cycle(ctx, t, l, "k", last)

	c.RestartMember(t, old)
	last = cycle(ctx, t, l, "k", last)
	solo := lockerOn(t, driverOn(t, old.Client(t)))
	cycle(ctx, t, solo, "k", last)

	require.NoError(t, held.Context().Err(), "renewed through the election")
	require.NoError(t, held.Release(ctx))
}

// The sole member restarted on its data directory: tokens go on from its
// revision.
func TestTokensIncreaseAfterSoleMemberRestarts(t *testing.T) {
	c := server(t)
	l, _, _ := locker(t, c)
	ctx := testCtx(t)
	last := cycle(ctx, t, l, "k", 0)
	c.Members[0].Kill()
	c.RestartMember(t, c.Members[0])
	cycle(ctx, t, l, "k", last)
}

// cutOff is a holder cut off from the cluster and the Locker that took its
// key next, with what each side saw, in the order it happened.
type cutOff struct {
	stale, fresh *mutex.Lock
	lostAt       time.Time // the stale lock's context ended (seen from the holder)
	grantedAt    time.Time // the other's attempt returned the grant
	endedFirst   bool      // the stale lock's context had ended when that grant returned
}

// cutOffHolder: a holder (TTL 1 s, renewed) whose only connection, to one
// member, stalls through a proxy, while another Locker polls for the key
// every few milliseconds and watches it.
func cutOffHolder(t *testing.T, c *etcdtest.Cluster) cutOff {
	ctx := testCtx(t)
	hcli, proxy := c.Members[0].ProxiedClient(t)
	holder := lockerOn(t, driverOn(t, hcli))
	lk, err := holder.Lock(ctx, "p", mutex.WithTTL(time.Second))
	require.NoError(t, err)
	var run cutOff
	lost := make(chan time.Time, 1)
	context.AfterFunc(lk.Context(), func() { lost <- time.Now() })
	granted := make(chan bool, 1)
	ob := &observed{Driver: driverOn(t, c.Client(t))}
	ob.onGrant = func(backend.Grant) {
		ended := lk.Context().Err() != nil // first: the causal check
		run.grantedAt = time.Now()
		granted <- ended
	}
	other := lockerOn(t, ob)
	fresh := make(chan *mutex.Lock, 1)
	go func() {
		w, err := other.Lock(ctx, "p", mutex.WithRetry(5*time.Millisecond, 20*time.Millisecond))
		assert.NoError(t, err)
		fresh <- w
	}()
	require.Eventually(t, func() bool { return ob.held.Load() > 0 }, 10*time.Second, time.Millisecond,
		"the other Locker contends")
	proxy.BlackHole()
	t.Cleanup(proxy.Heal) // before the holder's Locker and client close
	run.endedFirst = <-granted
	run.fresh = <-fresh
	require.NotNil(t, run.fresh)
	select {
	case run.lostAt = <-lost:
	case <-ctx.Done():
		t.Fatal("the cut-off holder was never told")
	}
	run.stale = lk
	return run
}

// A holder cut off from the cluster (its connection stalled) has its lock's
// context end, with ErrLockLost, before any other client is granted the
// key: at the moment the other's grant returned, the holder's context had
// ended already, and by the clocks of one process the loss came first.
func TestCutOffHolderLosesBeforeOtherIsGranted(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		run := cutOffHolder(t, c)
		assert.ErrorIs(t, context.Cause(run.stale.Context()), mutex.ErrLockLost)
		assert.True(t, run.endedFirst, "granted to the other while the holder's context was alive")
		assert.True(t, run.lostAt.Before(run.grantedAt), "lost at %v, granted at %v", run.lostAt, run.grantedAt)
		assert.Greater(t, run.fresh.Token(), run.stale.Token())
		t.Logf("the holder knew %v before the other was granted", run.grantedAt.Sub(run.lostAt))
	})
}

// A compaction while a waiter's watch is down (its connection cut and
// stalled) loses no waiter: the watch resumes from a revision compacted
// meanwhile, reads the key afresh, finds it free and wakes the waiter,
// whose poll (an hour) could not have (etcd issue 9715).
func TestCompactionDuringWaitLosesNoWaiter(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		ctx := testCtx(t)
		a, _, cli := locker(t, c)
		wcli, proxy := c.Members[len(c.Members)-1].ProxiedClient(t)
		wb := driverOn(t, wcli)
		ob := &observed{Driver: wb}
		w := lockerOn(t, ob)
		lk, err := a.Lock(ctx, "z", mutex.WithTTL(time.Hour))
		require.NoError(t, err)
		got := make(chan *mutex.Lock, 1)
		go func() {
			x, err := w.Lock(ctx, "z", mutex.WithRetry(time.Hour, time.Hour))
			assert.NoError(t, err)
			got <- x
		}()
		require.Eventually(t, func() bool { return ob.held.Load() == 2 && etcddriver.Streams(wb) == 1 },
			10*time.Second, time.Millisecond, "the waiter parked, watching the key")

		proxy.BlackHole()
		proxy.Cut() // the watch's stream is gone and cannot come back yet
		require.NoError(t, lk.Release(ctx))
		r, err := cli.Put(ctx, "t/other", "x")
		require.NoError(t, err)
		_, err = cli.Compact(ctx, r.Header.Revision, clientv3.WithCompactPhysical())
		require.NoError(t, err)
		proxy.Heal()

		var x *mutex.Lock
		select {
		case x = <-got:
		case <-ctx.Done():
			t.Fatal("the waiter was lost")
		}
		require.NotNil(t, x)
		assert.Greater(t, x.Token(), lk.Token())
		assert.Positive(t, etcddriver.Compactions(wb), "the watch found its revision compacted")
		assert.Equal(t, int32(2), ob.held.Load(), "woken by the watch, not by a poll")
		require.NoError(t, x.Release(ctx))
	})
}

var errReplyLost = errors.New("test: the release's reply was lost")

// lossy loses the reply to its first Release, as a connection reset after
// the release landed would. The Locker's Release then fails and releases once
// more in the background; that retry is held here until newer is closed,
// and its outcome sent on retried.
type lossy struct {
	*etcddriver.Driver
	calls   atomic.Int32 // Release calls; only the Locker's Release and its retry make them
	newer   chan struct{}
	retried chan int64
}

func (b *lossy) Release(ctx context.Context, l backend.Lease) (int64, error) {
	switch b.calls.Add(1) {
	case 1:
		left, err := b.Driver.Release(ctx, l)
		if err != nil || left != 0 {
			return left, err
		}
		return 0, errReplyLost
	case 2:
		select {
		case <-b.newer:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		left, err := b.Driver.Release(ctx, l)
		if err == nil {
			b.retried <- left
		}
		return left, err
	}
	return b.Driver.Release(ctx, l)
}

// A retried release never frees a newer holder (etcd issue 22082): the
// release lands, its reply is lost, another Locker takes the key under the
// same owner id, and only then does the Locker's retry run: it finds its
// holding gone (the create revision differs) and leaves the newer one.
func TestRetriedReleaseNeverFreesNewerHolder(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		ctx := testCtx(t)
		lb := &lossy{Driver: driverOn(t, c.Client(t)), newer: make(chan struct{}), retried: make(chan int64, 1)}
		a := lockerOn(t, lb)
		b, _, _ := locker(t, c)
		old, err := a.Lock(ctx, "d", mutex.WithOwner("job-9"))
		require.NoError(t, err)
		require.ErrorIs(t, old.Release(ctx), errReplyLost)

		newer, err := b.Lock(ctx, "d", mutex.WithOwner("job-9"))
		require.NoError(t, err)
		require.Greater(t, newer.Token(), old.Token())
		close(lb.newer)
		select {
		case left := <-lb.retried:
			assert.Equal(t, int64(-1), left, "the retry found its holding gone")
		case <-ctx.Done():
			t.Fatal("no retry")
		}
		info, err := operator(t, b).Inspect(ctx, "d")
		require.NoError(t, err)
		assert.Equal(t, admin.Held, info.State)
		assert.Equal(t, newer.Token(), info.Token, "the newer holding stays")
		require.NoError(t, newer.Context().Err())
		require.NoError(t, newer.Release(ctx))
	})
}

// With no majority of members left, the cluster is gone: a holder learns it
// from its lease's end (ErrLockLost at its local deadline), and Lock and
// TryLock return by the caller's deadline with an error matching
// ErrUnavailable (and ErrNotAcquired, and the context's error). Once the
// members are back, locks are granted again, with later tokens.
func TestUnavailableWhenClusterGone(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		l, _, _ := locker(t, c)
		ctx := testCtx(t)
		lk, err := l.Lock(ctx, "u", mutex.WithTTL(time.Second))
		require.NoError(t, err)
		gone := c.Members[:len(c.Members)/2+1]
		for _, m := range gone {
			m.Kill()
		}
		late := testutil.MeasureLateness(t)
		select {
		case <-lk.Context().Done():
			assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
			assert.Less(t, time.Since(lk.Deadline()), late.Bound(50*time.Millisecond), "lost at the lease deadline")
		case <-ctx.Done():
			t.Fatal("the holder was never told")
		}
		const wait = 200 * time.Millisecond
		for name, call := range map[string]func(context.Context) error{
			"Lock":    func(ctx context.Context) error { _, err := l.Lock(ctx, "v"); return err },
			"TryLock": func(ctx context.Context) error { _, err := l.TryLock(ctx, "v"); return err },
		} {
			cctx, cancel := context.WithTimeout(ctx, wait)
			start := time.Now()
			err := call(cctx)
			took := time.Since(start)
			cancel()
			assert.ErrorIs(t, err, mutex.ErrUnavailable, name)
			assert.ErrorIs(t, err, mutex.ErrNotAcquired, name)
			assert.ErrorIs(t, err, context.DeadlineExceeded, name)
			assert.Less(t, took, late.Bound(wait+50*time.Millisecond), "%s took %v", name, took)
		}
		// Back: also the Locker's clean-ups of those attempts, which its
		// Close waits for, end instead of retrying out their timeout.
		for _, m := range gone {
			c.RestartMember(t, m)
		}
		// Not "u": its lease, refreshed by the new leader, outlives the
		// outage by its TTL (etcd's lessor extends every lease on promotion).
		cycle(ctx, t, l, "w", lk.Token())
	})
}
