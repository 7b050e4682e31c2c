package etcddriver_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/mutex/backend"
)

// counted is a client that counts the calls a Driver makes, by name.
type counted struct {
	*clientv3.Client
	mu    sync.Mutex
	calls map[string]int
}

func countedClient(t *testing.T, s *etcdtest.Cluster) *counted {
	return &counted{Client: s.Client(t), calls: map[string]int{}}
}

func (c *counted) add(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[name]++
}

// took returns the calls counted since the last took.
func (c *counted) took() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls = map[string]int{}
	return out
}

func (c *counted) Txn(ctx context.Context) clientv3.Txn { c.add("Txn"); return c.Client.Txn(ctx) }
func (c *counted) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	c.add("Get")
	return c.Client.Get(ctx, key, opts...)
}
func (c *counted) Grant(ctx context.Context, ttl int64) (*clientv3.LeaseGrantResponse, error) {
	c.add("Grant")
	return c.Client.Grant(ctx, ttl)
}
func (c *counted) Revoke(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseRevokeResponse, error) {
	c.add("Revoke")
	return c.Client.Revoke(ctx, id)
}
func (c *counted) TimeToLive(ctx context.Context, id clientv3.LeaseID, opts ...clientv3.LeaseOption) (*clientv3.LeaseTimeToLiveResponse, error) {
	c.add("TimeToLive")
	return c.Client.TimeToLive(ctx, id, opts...)
}
func (c *counted) KeepAliveOnce(ctx context.Context, id clientv3.LeaseID) (*clientv3.LeaseKeepAliveResponse, error) {
	c.add("KeepAliveOnce")
	return c.Client.KeepAliveOnce(ctx, id)
}

// countedDriver is a Driver over a counted client, closed at clean-up.
func countedDriver(t *testing.T, s *etcdtest.Cluster) (*etcddriver.Driver, *counted) {
	c := countedClient(t, s)
	return driverOn(t, c), c
}

// clock is a test's clock: the real one, moved on by hand.
type clock struct{ ahead atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.ahead.Load())) }
func (c *clock) advance(d time.Duration) { c.ahead.Add(int64(d)) }

// leasesWithKeys reads every lease of the cluster: how many there are, and
// how many have a key on them.
func leasesWithKeys(t *testing.T, cli *clientv3.Client) (all, withKeys int) {
	t.Helper()
	ctx := testCtx(t)
	r, err := cli.Leases(ctx)
	require.NoError(t, err)
	for _, l := range r.Leases {
		ttl, err := cli.TimeToLive(ctx, l.ID, clientv3.WithAttachedKeys())
		require.NoError(t, err)
		if len(ttl.Keys) > 0 {
			withKeys++
		}
	}
	return len(r.Leases), withKeys
}

// An uncontended Lock+Release sends two transactions once a lease is kept:
// no grant, no revoke, no lease read (the round trips of
// concurrency.Mutex's cycle on a long-lived session).
func TestUncontendedCycleSendsTwoTransactions(t *testing.T) {
	s := server(t)
	b, c := countedDriver(t, s)
	l := lockerOn(t, b)
	ctx := testCtx(t)
	cycle := func() {
		lk, err := l.Lock(ctx, "u")
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	}
	cycle()
	assert.Equal(t, map[string]int{"Grant": 1, "Txn": 2}, c.took(), "the first cycle grants the lease")
	assert.Equal(t, 1, etcddriver.Pooled(b))
	for range 20 {
		cycle()
	}
	assert.Equal(t, map[string]int{"Txn": 40}, c.took())
	all, withKeys := leasesWithKeys(t, s.Client(t))
	assert.Equal(t, 1, all, "one lease, kept")
	assert.Zero(t, withKeys, "and nothing is on it")
}

// A kept lease is reused only while it lasts the attempt's TTL from the
// attempt (rule 2): a lease for 10s locks is granted for 11s, so it is
// reused for a second after its grant, never later; the one too old is
// revoked.
func TestPooledLeaseCoversTheTTL(t *testing.T) {
	s := server(t)
	b, c := countedDriver(t, s)
	var clk clock
	etcddriver.SetClock(b, clk.now)
	ctx := testCtx(t)
	a := backend.Attempt{Key: "p", Owner: "o", TTL: 10 * time.Second}
	cycle := func() (leaseID clientv3.LeaseID) {
		t.Helper()
		g, err := b.Acquire(ctx, a)
		require.NoError(t, err)
		require.Equal(t, backend.Acquired, g.Status)
		r, err := c.Client.Get(ctx, testPrefix+"p")
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1)
		left, err := b.Release(ctx, backend.Lease{Key: "p", Owner: "o", Token: g.Token, Handle: g.Handle})
		require.NoError(t, err)
		require.Zero(t, left)
		return clientv3.LeaseID(r.Kvs[0].Lease)
	}
	first := cycle()
	ttl, err := c.Client.TimeToLive(ctx, first)
	require.NoError(t, err)
	assert.Equal(t, int64(11), ttl.GrantedTTL, "10s rounded up, and a second to reuse it in")
	c.took()

	clk.advance(900 * time.Millisecond)
	assert.Equal(t, first, cycle(), "reused: it still lasts 10s from the attempt")
	assert.Equal(t, map[string]int{"Txn": 2}, c.took())

	clk.advance(200 * time.Millisecond) // 1.1s after its grant: 9.9s left at most
	second := cycle()
	assert.NotEqual(t, first, second, "too old for a 10s lock: a new lease")
	assert.Equal(t, 1, etcddriver.Pooled(b))
	require.Eventually(t, func() bool {
		r, err := c.Client.TimeToLive(ctx, first)
		return err == nil && r.TTL == -1
	}, 10*time.Second, 10*time.Millisecond, "the old lease is revoked")
}

// An attempt that finds the key held puts its lease back: the next attempt
// grants none.
func TestHeldAttemptKeepsItsLease(t *testing.T) {
	s := server(t)
	b, c := countedDriver(t, s)
	ctx := testCtx(t)
	_, err := b.Acquire(ctx, attempt("h", "a"))
	require.NoError(t, err)
	c.took()
	for range 3 {
		g, err := b.Acquire(ctx, attempt("h", "b"))
		require.NoError(t, err)
		require.Equal(t, backend.Held, g.Status)
	}
	assert.Equal(t, map[string]int{"Grant": 1, "Txn": 3, "TimeToLive": 3}, c.took())
	assert.Equal(t, 1, etcddriver.Pooled(b))
}

// A kept lease revoked behind the Driver's back: the attempt's transaction
// fails with nothing written, and the attempt goes on with a lease granted
// then.
func TestPooledLeaseGoneIsReplaced(t *testing.T) {
	s := server(t)
	b, c := countedDriver(t, s)
	ctx := testCtx(t)
	g, err := b.Acquire(ctx, attempt("r", "o"))
	require.NoError(t, err)
	r, err := c.Client.Get(ctx, testPrefix+"r")
	require.NoError(t, err)
	_, err = b.Release(ctx, backend.Lease{Key: "r", Owner: "o", Token: g.Token, Handle: g.Handle})
	require.NoError(t, err)
	require.Equal(t, 1, etcddriver.Pooled(b))
	_, err = c.Client.Revoke(ctx, clientv3.LeaseID(r.Kvs[0].Lease))
	require.NoError(t, err)

	g, err = b.Acquire(ctx, attempt("r", "o"))
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, g.Status)
	r, err = c.Client.Get(ctx, testPrefix+"r")
	require.NoError(t, err)
	require.Len(t, r.Kvs, 1)
	ttl, err := c.Client.TimeToLive(ctx, clientv3.LeaseID(r.Kvs[0].Lease))
	require.NoError(t, err)
	assert.Greater(t, ttl.TTL, int64(50), "the key is on a live lease of the attempt's TTL")
}

// Extend keeps the lock's lease alive when the Lease carries the Driver's
// handle; without one it puts the key on a new lease, and the old one is
// revoked.
func TestExtendWithAndWithoutHandle(t *testing.T) {
	s := server(t)
	b, c := countedDriver(t, s)
	ctx := testCtx(t)
	g, err := b.Acquire(ctx, attempt("e", "o"))
	require.NoError(t, err)
	leaseOf := func() clientv3.LeaseID {
		r, err := c.Client.Get(ctx, testPrefix+"e")
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1)
		return clientv3.LeaseID(r.Kvs[0].Lease)
	}
	first := leaseOf()
	l := backend.Lease{Key: "e", Owner: "o", Token: g.Token, TTL: time.Minute, Handle: g.Handle}
	c.took()
	got, err := b.Extend(ctx, []backend.Lease{l})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Renewed}, got)
	assert.Equal(t, map[string]int{"KeepAliveOnce": 1, "Txn": 1}, c.took())
	assert.Equal(t, first, leaseOf())

	l.Handle = nil
	got, err = b.Extend(ctx, []backend.Lease{l})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Renewed}, got)
	assert.NotEqual(t, first, leaseOf(), "moved to a new lease")
	require.Eventually(t, func() bool {
		r, err := c.Client.TimeToLive(ctx, first)
		return err == nil && r.TTL == -1
	}, 10*time.Second, 10*time.Millisecond, "the old lease is revoked")
}

// Re-entry with an owner id puts the key on the re-entering attempt's lease;
// whichever Lock releases last, no lease is left with a key, and the one
// left is kept.
func TestReentryLeavesNoLeaseWithAKey(t *testing.T) {
	for _, name := range []string{"first-released-last", "second-released-last"} {
		t.Run(name, func(t *testing.T) {
			s := server(t)
			b, c := countedDriver(t, s)
			ctx := testCtx(t)
			a := backend.Attempt{Key: "re", Owner: "job", TTL: time.Minute, Shared: true}
			g1, err := b.Acquire(ctx, a)
			require.NoError(t, err)
			g2, err := b.Acquire(ctx, a)
			require.NoError(t, err)
			require.Equal(t, backend.Reentered, g2.Status)
			locks := []backend.Grant{g1, g2}
			if name == "first-released-last" {
				locks = []backend.Grant{g2, g1}
			}
			for i, g := range locks {
				left, err := b.Release(ctx, backend.Lease{Key: "re", Owner: "job", Token: g.Token, Handle: g.Handle})
				require.NoError(t, err)
				assert.Equal(t, int64(1-i), left)
			}
			require.Eventually(t, func() bool {
				all, withKeys := leasesWithKeys(t, c.Client)
				return withKeys == 0 && all == etcddriver.Pooled(b)
			}, 10*time.Second, 10*time.Millisecond, "no lease with a key, none but those kept")
		})
	}
}

// Close revokes the leases the Driver kept.
func TestCloseRevokesKeptLeases(t *testing.T) {
	s := server(t)
	cli := s.Client(t)
	b, err := etcddriver.New(cli)
	require.NoError(t, err)
	ctx := testCtx(t)
	for _, k := range []string{"a", "b"} {
		g, err := b.Acquire(ctx, attempt(k, "o"))
		require.NoError(t, err)
		defer func() {
			_, err := b.Release(ctx, backend.Lease{Key: k, Owner: "o", Token: g.Token, Handle: g.Handle})
			assert.ErrorIs(t, err, etcddriver.ErrClosed)
		}()
	}
	g, err := b.Acquire(ctx, attempt("c", "o"))
	require.NoError(t, err)
	_, err = b.Release(ctx, backend.Lease{Key: "c", Owner: "o", Token: g.Token, Handle: g.Handle})
	require.NoError(t, err)
	require.Equal(t, 1, etcddriver.Pooled(b))
	require.NoError(t, b.Close())
	all, withKeys := leasesWithKeys(t, cli)
	assert.Equal(t, 2, all, "the two held locks' leases stay; the kept one is revoked")
	assert.Equal(t, 2, withKeys)
}

// A release with the lock's handle compares the key's mod revision alone:
// retried after it succeeded, or after the key was freed and taken again by
// the same owner id, it finds the newer holding and leaves it.
func TestReleaseWithHandleNeverFreesNewerHolder(t *testing.T) {
	s := server(t)
	b, c := countedDriver(t, s)
	ctx := testCtx(t)
	a := attempt("n", "same")
	old, err := b.Acquire(ctx, a)
	require.NoError(t, err)
	stale := backend.Lease{Key: "n", Owner: "same", Token: old.Token, Handle: old.Handle}
	_, err = c.Client.Delete(ctx, testPrefix+"n") // the lease ran out, say
	require.NoError(t, err)
	newer, err := b.Acquire(ctx, a)
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, newer.Status)

	left, err := b.Release(ctx, stale)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), left, "the old holding is gone")
	l := backend.Lease{Key: "n", Owner: "same", Token: newer.Token, Handle: newer.Handle}
	left, err = b.Release(ctx, l)
	require.NoError(t, err)
	assert.Zero(t, left)
	again, err := b.Acquire(ctx, a)
	require.NoError(t, err)
	left, err = b.Release(ctx, l) // retried, as after a lost reply
	require.NoError(t, err)
	assert.Equal(t, int64(-1), left)
	r, err := c.Client.Get(ctx, testPrefix+"n")
	require.NoError(t, err)
	require.Len(t, r.Kvs, 1, "the holder after the release keeps the key")
	assert.Equal(t, again.Token, r.Kvs[0].CreateRevision)
}

// A key written since the handle last saw it (moved to a new lease by an
// Extend without the handle) is still released with one count, and its
// lease, which the handle does not know, is revoked rather than kept.
func TestReleaseAfterAWriteTheHandleMissed(t *testing.T) {
	s := server(t)
	b, c := countedDriver(t, s)
	ctx := testCtx(t)
	g, err := b.Acquire(ctx, attempt("w", "o"))
	require.NoError(t, err)
	got, err := b.Extend(ctx, []backend.Lease{{Key: "w", Owner: "o", Token: g.Token, TTL: time.Minute}})
	require.NoError(t, err)
	require.Equal(t, []backend.Renewal{backend.Renewed}, got)
	c.took()
	left, err := b.Release(ctx, backend.Lease{Key: "w", Owner: "o", Token: g.Token, Handle: g.Handle})
	require.NoError(t, err)
	assert.Zero(t, left)
	assert.Equal(t, 2, c.took()["Txn"], "the compare of the old write failed, the next compares the key as read")
	r, err := c.Client.Get(ctx, testPrefix+"w")
	require.NoError(t, err)
	assert.Empty(t, r.Kvs)
	require.Eventually(t, func() bool {
		all, withKeys := leasesWithKeys(t, c.Client)
		return withKeys == 0 && all == etcddriver.Pooled(b)
	}, 10*time.Second, 10*time.Millisecond, "no lease with a key, none but those kept")
}

// Two holdings of one owner with different TTLs: the longer one's re-entry
// moved the key to its lease; the shorter one's Extend, which finds the key
// off its own lease, must not put it on a lease shorter than what the
// longer one has left, nor may its Release: the longer holder's deadline
// comes first.
func TestExtendNeverShortensAnotherHoldingsLease(t *testing.T) {
	s := server(t)
	b, c := countedDriver(t, s)
	ctx := testCtx(t)
	short, err := b.Acquire(ctx, backend.Attempt{Key: "m", Owner: "o", TTL: 2 * time.Second})
	require.NoError(t, err)
	long, err := b.Acquire(ctx, backend.Attempt{Key: "m", Owner: "o", TTL: 30 * time.Second})
	require.NoError(t, err)
	require.Equal(t, backend.Reentered, long.Status)
	left := func() int64 {
		r, err := c.Client.Get(ctx, testPrefix+"m")
		require.NoError(t, err)
		require.Len(t, r.Kvs, 1)
		ttl, err := c.Client.TimeToLive(ctx, clientv3.LeaseID(r.Kvs[0].Lease))
		require.NoError(t, err)
		return ttl.TTL
	}
	require.GreaterOrEqual(t, left(), int64(29), "the re-entry moved the key to the longer lease")

	ls := backend.Lease{Key: "m", Owner: "o", Token: short.Token, TTL: 2 * time.Second, Handle: short.Handle}
	got, err := b.Extend(ctx, []backend.Lease{ls})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Renewed}, got)
	assert.GreaterOrEqual(t, left(), int64(29), "the shorter holding's Extend kept what the longer one has left")

	n, err := b.Release(ctx, ls)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	assert.GreaterOrEqual(t, left(), int64(29), "the longer holding keeps its lease after the shorter one's release")
}
