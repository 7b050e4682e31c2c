package mutex_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// eachInspectable runs fn on the deployments inspection must read: the
// lock suite's, and Sentinel.
func eachInspectable(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	eachBackend(t, fn)
	t.Run("sentinel", func(t *testing.T) {
		c := testutil.Sentinel(t).Client()
		t.Cleanup(func() { _ = c.Close() })
		fn(t, c)
	})
}

// waitFor polls cond until it holds or ctx ends: for state that another
// process (here, another Locker) changes on the server, where there is
// nothing local to wait on.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// A held lock is seen with its owner's info, token, times, lease and the
// Lockers queued behind it; a freed one as free with its last token.
func TestInspectHeldLock(t *testing.T) {
	host, _ := os.Hostname()
	eachInspectable(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		holder := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "billing", Label: "canary 7"}))
		waiter := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "reports", Host: "box-2", PID: 42}))
		viewer := newLocker(t, c)

		in, err := viewer.Inspect(ctx, "acct:1")
		require.NoError(t, err)
		assert.Equal(t, mutex.Free, in.State)
		assert.Zero(t, in.Token, "a key never locked has no token")

		lk, err := holder.Lock(ctx, "acct:1", mutex.WithTTL(20*time.Second))
		require.NoError(t, err)
		in, err = viewer.Inspect(ctx, "acct:1")
		require.NoError(t, err)
		assert.Equal(t, mutex.Held, in.State)
		assert.Equal(t, "acct:1", in.Key)
		assert.Equal(t, mutex.LockKeyOf(viewer, "acct:1"), in.Name)
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
				err = wl.Unlock(ctx)
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
		assert.Equal(t, mutex.LockerIDOf(waiter), w.Locker)
		assert.Equal(t, mutex.OwnerInfo{Service: "reports", Host: "box-2", PID: 42}, w.Info)
		assert.False(t, w.Since.After(in.ServerTime))
		assert.Equal(t, in.ServerTime.Sub(w.Since), w.Waited)

		require.NoError(t, lk.Unlock(ctx))
		select {
		case err := <-got:
			require.NoError(t, err)
		case <-ctx.Done():
			t.Fatal("the waiter never got the lock")
		}
		in, err = viewer.Inspect(ctx, "acct:1")
		require.NoError(t, err)
		assert.Equal(t, mutex.Free, in.State)
		assert.Greater(t, in.Token, lk.Token(), "a freed key shows the last token issued")
		assert.Empty(t, in.Owner)
	})
}

// A WithOwner lock shows its caller's id as it is, with its Redis count,
// and no OwnerInfo; braces in a key do not hide it.
func TestInspectOwnerAndCount(t *testing.T) {
	c, _ := testutil.Redis(t)
	ctx := context.Background()
	l := newLocker(t, c)
	for range 2 {
		lk, err := l.TryLock(ctx, "{job}:7", mutex.WithOwner("worker@host-9"))
		require.NoError(t, err)
		t.Cleanup(func() { _ = lk.Unlock(ctx) })
	}
	in, err := newLocker(t, c).Inspect(ctx, "{job}:7")
	require.NoError(t, err)
	assert.Equal(t, mutex.Held, in.State)
	assert.Equal(t, "worker@host-9", in.Owner)
	assert.Equal(t, mutex.OwnerInfo{}, in.Info)
	assert.Equal(t, 2, in.Count)
	assert.Equal(t, "{job}:7", in.Key)
}

// The owner info costs nothing to the protocol: it is inside the owner id,
// which a longer OwnerInfo lengthens up to its bound.
func TestOwnerInfoBound(t *testing.T) {
	c, _ := testutil.Redis(t)
	l := mutex.New(c, mutex.WithOwnerInfo(mutex.OwnerInfo{Label: strings.Repeat("x", 300)}))
	defer l.Close()
	_, err := l.TryLock(context.Background(), "k")
	assert.ErrorIs(t, err, mutex.ErrInvalid)
}

// A listing finds exactly the held locks among many other keys, on every
// master, page by page within its bound of round trips, and filters by
// pattern, braces included.
func TestListFindsHeldLocks(t *testing.T) {
	eachInspectable(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		l := newLocker(t, c)
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
			t.Cleanup(func() { _ = lk.Unlock(context.Background()) })
			want = append(want, key)
		}
		for i := range 5 { // freed: remembered tokens, not locks
			lk, err := l.TryLock(ctx, fmt.Sprintf("job:freed:%d", i))
			require.NoError(t, err)
			require.NoError(t, lk.Unlock(ctx))
		}
		other, err := l.TryLock(ctx, "report:1")
		require.NoError(t, err)
		t.Cleanup(func() { _ = other.Unlock(context.Background()) })

		var got []string
		o := mutex.ListOptions{Match: "job:*", Count: 100, Scans: 2}
		pages := 0
		for {
			page, err := l.List(ctx, o)
			require.NoError(t, err)
			pages++
			assert.LessOrEqual(t, page.RoundTrips, o.Scans+1, "a call exceeded its bound")
			for _, in := range page.Locks {
				assert.Equal(t, mutex.Held, in.State)
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

		all, err := l.ListAll(ctx, mutex.ListOptions{Match: "job:freed:*", Free: true})
		require.NoError(t, err)
		assert.Len(t, all, 5, "Free lists the remembered tokens too")
		held, err := l.ListAll(ctx, mutex.ListOptions{Match: "job:{[0-9]*}"})
		require.NoError(t, err)
		assert.Len(t, held, 4)
	})
}

// Redis's own KEYS decides what a pattern matches: List's filter agrees
// with it.
func TestListMatchesAsRedis(t *testing.T) {
	c, _ := testutil.Redis(t)
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
			if mutex.MatchGlob(p, k) {
				got = append(got, k)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		assert.Equal(t, want, got, "pattern %q", p)
	}
}

// A forced release ends the holder by its next renewal, well before its
// lease would, leaves a token floor every later token exceeds, wakes a
// waiter, is audited beside the key and counted by reason.
func TestForceRelease(t *testing.T) {
	eachInspectable(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		holder := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "stuck"}))
		op := newLocker(t, c, mutex.WithMeterProvider(mp))
		next := newLocker(t, c)

		const ttl = 3 * time.Second
		lk, err := holder.Lock(ctx, "ledger", mutex.WithTTL(ttl))
		require.NoError(t, err)
		waiting := make(chan *mutex.Lock, 1)
		go func() {
			// An hour's poll: only the forced release's notification wakes it.
			nl, err := next.Lock(ctx, "ledger", mutex.WithRetry(time.Hour, time.Hour))
			assert.NoError(t, err)
			waiting <- nl
		}()
		waitFor(t, ctx, "the waiter never queued", func() bool {
			in, err := op.Inspect(ctx, "ledger")
			require.NoError(t, err)
			return len(in.Waiters) == 1
		})

		_, err = op.ForceRelease(ctx, "ledger", mutex.ForceOptions{Token: lk.Token() + 1, Reason: "stuck job"})
		assert.ErrorIs(t, err, mutex.ErrNotHeld, "another token than the holder's changes nothing")

		held := holder.Held()
		require.Len(t, held, 1)
		localDeadline := time.Now().Add(held[0].Lease)
		res, err := op.ForceRelease(ctx, "ledger", mutex.ForceOptions{Token: lk.Token(), By: "alice", Reason: "stuck job"})
		require.NoError(t, err)
		assert.Equal(t, lk.Token(), res.Token)
		assert.Equal(t, lk.Token()+1, res.Floor)
		assert.Equal(t, "stuck", res.Info.Service)
		assert.Equal(t, 1, res.Released)

		var nl *mutex.Lock
		select {
		case nl = <-waiting:
			assert.True(t, time.Now().Before(localDeadline), "the waiter was woken by its poll at the lease's end, not by the release")
		case <-ctx.Done():
			t.Fatal("the waiter was not woken")
		}
		require.NotNil(t, nl)
		assert.Greater(t, nl.Token(), res.Floor, "a later token exceeds the floor")

		select {
		case <-lk.Context().Done():
			assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
			assert.True(t, time.Now().Before(localDeadline), "the holder learnt of it from its lease running out, not from its renewal")
		case <-ctx.Done():
			t.Fatal("the old holder never learnt it lost the lock")
		}
		assert.ErrorIs(t, lk.Unlock(ctx), mutex.ErrNotHeld)
		in, err := op.Inspect(ctx, "ledger")
		require.NoError(t, err)
		assert.Equal(t, nl.Token(), in.Token, "the old holder's Unlock freed the next one's lock")
		require.Len(t, in.Forced, 1)
		f := in.Forced[0]
		assert.Equal(t, "alice", f.By)
		assert.Equal(t, "stuck job", f.Reason)
		assert.Equal(t, lk.Token(), f.Token)
		assert.Equal(t, res.Floor, f.Floor)
		assert.Equal(t, "stuck", f.Info.Service)
		assert.WithinDuration(t, in.ServerTime, f.At, 10*time.Second)
		require.NoError(t, nl.Unlock(ctx))

		_, err = op.ForceRelease(ctx, "ledger", mutex.ForceOptions{Reason: "again"})
		assert.ErrorIs(t, err, mutex.ErrNotHeld, "a free key")

		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(ctx, &rm))
		assert.Equal(t, int64(1), forcedCount(rm, "stuck job"))
	})
}

func forcedCount(rm metricdata.ResourceMetrics, reason string) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "redfence.lock.forced_releases" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, ok := dp.Attributes.Value("redfence.reason"); ok && v.AsString() == reason {
					n += dp.Value
				}
			}
		}
	}
	return n
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
	viewer := newRedlock(t, clients)
	in, err := viewer.Inspect(ctx, "batch")
	require.NoError(t, err)
	assert.Equal(t, mutex.Held, in.State)
	assert.Equal(t, lk.Token(), in.Token)
	assert.Equal(t, "nightly", in.Info.Service)
	require.Len(t, in.Nodes, 3)
	held := 0
	for _, n := range in.Nodes {
		require.NoError(t, n.Err)
		if n.Info.State == mutex.Held {
			held++ // (Lock returns at the quorum: the last node may still be granting)
		}
		assert.Equal(t, srvs[n.Node].Addr(), n.Addr)
	}
	assert.GreaterOrEqual(t, held, 2)

	// A lock on one node alone is nobody's.
	solo := newLocker(t, clients[0])
	sl, err := solo.TryLock(ctx, "minority")
	require.NoError(t, err)
	defer sl.Unlock(ctx)
	in, err = viewer.Inspect(ctx, "minority")
	require.NoError(t, err)
	assert.Equal(t, mutex.Free, in.State)
	assert.Equal(t, mutex.Held, in.Nodes[0].Info.State)

	locks, err := viewer.ListAll(ctx, mutex.ListOptions{})
	require.NoError(t, err)
	require.Len(t, locks, 1, "each key once, and the minority's not at all")
	assert.Equal(t, "batch", locks[0].Key)

	srvs[2].Kill()
	in, err = viewer.Inspect(ctx, "batch")
	require.NoError(t, err, "a majority answers")
	assert.Equal(t, mutex.Held, in.State)
	assert.Error(t, in.Nodes[2].Err)
	page, err := viewer.List(ctx, mutex.ListOptions{Scans: 10})
	require.NoError(t, err, "a majority answers the listing too")
	require.Len(t, page.Locks, 1)
	assert.Equal(t, "batch", page.Locks[0].Key)
	require.NotEmpty(t, page.Skipped, "the dead node is named")
	assert.ErrorContains(t, page.Skipped[0], "scan node 2")
	assert.WithinDuration(t, time.UnixMicro(lk.Token()).Add(-100*time.Millisecond), in.AcquiredAt, 0, "read from the proposal")

	res, err := viewer.ForceRelease(ctx, "batch", mutex.ForceOptions{Reason: "drill"})
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
	_, err = viewer.ForceRelease(ctx, "batch", mutex.ForceOptions{Token: nl.Token(), Reason: "drill"})
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.NotErrorIs(t, err, mutex.ErrNotHeld)
}

// A server that does not answer within the caller's deadline is an
// outcome unknown, never an answer: not a free key, not "nobody holds it",
// not an empty listing; with a client that does not apply deadlines itself.
func TestInspectHungServer(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: testutil.SilentServer(t), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	l := newLocker(t, c)
	for name, call := range map[string]func(ctx context.Context) error{
		"Inspect": func(ctx context.Context) error { _, err := l.Inspect(ctx, "k"); return err },
		"List":    func(ctx context.Context) error { _, err := l.List(ctx, mutex.ListOptions{}); return err },
		"ForceRelease": func(ctx context.Context) error {
			_, err := l.ForceRelease(ctx, "k", mutex.ForceOptions{Reason: "r"})
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

// The pattern matcher's cost is bounded by the lengths, whatever the
// pattern: one that backtracks exponentially in a naive matcher ends.
func TestMatchGlobIsLinear(t *testing.T) {
	done := make(chan bool, 1)
	go func() {
		done <- mutex.MatchGlob(strings.Repeat("*a", 40)+"*b", strings.Repeat("a", 200))
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	select {
	case m := <-done:
		assert.False(t, m)
	case <-ctx.Done():
		t.Fatal("the matcher backtracks without bound")
	}
}

// Held lists this Locker's own locks with what a debug page shows.
func TestHeld(t *testing.T) {
	c, _ := testutil.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c)
	assert.Empty(t, l.Held())
	a, err := l.Lock(ctx, "b-key", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	b, err := l.Lock(ctx, "a-key", mutex.WithTTL(time.Minute), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	_, err = l.Lock(a.Context(), "b-key") // re-entered
	require.NoError(t, err)
	require.NoError(t, a.Extend(ctx, time.Minute))
	got := make(chan error, 1)
	go func() {
		lk, err := l.Lock(ctx, "a-key")
		if err == nil {
			err = lk.Unlock(ctx)
		}
		got <- err
	}()
	waitFor(t, ctx, "the local waiter never queued", func() bool { return mutex.WaitersOf(l, "a-key") == 1 })

	held := l.Held()
	require.Len(t, held, 2)
	assert.Equal(t, "a-key", held[0].Key)
	assert.Equal(t, b.Token(), held[0].Token)
	assert.False(t, held[0].AutoRenew)
	assert.Equal(t, 1, held[0].Waiters)
	assert.Equal(t, 1, held[0].Count)
	assert.Equal(t, "b-key", held[1].Key)
	assert.Equal(t, 2, held[1].Count)
	assert.Equal(t, 1, held[1].Renewals)
	assert.Greater(t, held[1].LastRenewal, time.Duration(0))
	assert.Greater(t, held[1].Lease, 50*time.Second)
	assert.Equal(t, time.Minute, held[1].TTL)
	assert.GreaterOrEqual(t, held[1].HeldFor, time.Duration(0))

	require.NoError(t, b.Unlock(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the waiter never got the lock")
	}
	require.NoError(t, a.Unlock(ctx))
	require.NoError(t, a.Unlock(ctx))
	assert.Empty(t, l.Held())
}

// Inspection, listing and forced release refuse bad input before any round
// trip, and say plainly when a backend cannot be inspected.
func TestInspectBadInput(t *testing.T) {
	c, _ := testutil.Redis(t)
	ctx := context.Background()
	l := newLocker(t, c)
	var nilLocker *mutex.Locker
	var nilCtx context.Context
	before, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	for name, call := range map[string]func() error{
		"Inspect empty key":    func() error { _, err := l.Inspect(ctx, ""); return err },
		"Inspect nil ctx":      func() error { _, err := l.Inspect(nilCtx, "k"); return err },
		"Inspect nil Locker":   func() error { _, err := nilLocker.Inspect(ctx, "k"); return err },
		"List nil Locker":      func() error { _, err := nilLocker.List(ctx, mutex.ListOptions{}); return err },
		"List nil ctx":         func() error { _, err := l.List(nilCtx, mutex.ListOptions{}); return err },
		"List negative Scans":  func() error { _, err := l.List(ctx, mutex.ListOptions{Scans: -1}); return err },
		"List huge Count":      func() error { _, err := l.List(ctx, mutex.ListOptions{Count: 1 << 20}); return err },
		"List foreign cursor":  func() error { _, err := l.List(ctx, mutex.ListOptions{Cursor: "x"}); return err },
		"List cursor past end": func() error { _, err := l.List(ctx, mutex.ListOptions{Cursor: "9:0:" + c.Options().Addr}); return err },
		"List cursor at end":   func() error { _, err := l.List(ctx, mutex.ListOptions{Cursor: "1:0:" + c.Options().Addr}); return err },
		"List cursor of another server": func() error {
			_, err := l.List(ctx, mutex.ListOptions{Cursor: "0:17:127.0.0.1:1"})
			return err
		},
		"Force without reason": func() error { _, err := l.ForceRelease(ctx, "k", mutex.ForceOptions{}); return err },
		"Force negative token": func() error {
			_, err := l.ForceRelease(ctx, "k", mutex.ForceOptions{Token: -1, Reason: "r"})
			return err
		},
		"Force invalid UTF-8": func() error { _, err := l.ForceRelease(ctx, "k", mutex.ForceOptions{Reason: "\xff"}); return err },
		"Force empty key":     func() error { _, err := l.ForceRelease(ctx, "", mutex.ForceOptions{Reason: "r"}); return err },
		"OwnerInfo negative pid": func() error {
			l := mutex.New(c, mutex.WithOwnerInfo(mutex.OwnerInfo{PID: -1}))
			defer l.Close()
			_, err := l.Inspect(ctx, "k")
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, testutil.Safely(t, 5*time.Second, call), mutex.ErrInvalid)
		})
	}
	after, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Equal(t, evalCalls(before), evalCalls(after), "bad input must not reach Redis")
	assert.Nil(t, nilLocker.Held())

	ext := mutex.NewWithBackend(newMemory())
	defer ext.Close()
	_, err = ext.Inspect(ctx, "k")
	assert.True(t, errors.Is(err, errors.ErrUnsupported), "Inspect on an outside backend: %v", err)
	_, err = ext.List(ctx, mutex.ListOptions{})
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = ext.ForceRelease(ctx, "k", mutex.ForceOptions{Reason: "r"})
	assert.ErrorIs(t, err, errors.ErrUnsupported)
}
