package etcddriver_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

func attempt(key, owner string) backend.Attempt {
	return backend.Attempt{Key: key, Owner: owner, TTL: time.Minute}
}

// minLease is the server's shortest lease.
func minLease(t *testing.T, c *etcdtest.Cluster) time.Duration {
	t.Helper()
	cli := c.Client(t)
	g, err := cli.Grant(testCtx(t), 1)
	require.NoError(t, err)
	_, err = cli.Revoke(testCtx(t), g.ID)
	require.NoError(t, err)
	return time.Duration(g.TTL) * time.Second
}

// A retried release never frees a newer holder (etcd issue 22082): the
// owner's key, deleted behind its back, is taken again by the same owner id
// under a new create revision; the first holding's Release, retried, finds
// it not held and leaves it, as does its Extend.
func TestStaleReleaseNeverFreesNewerHolding(t *testing.T) {
	s := server(t)
	b, cli := driver(t, s)
	ctx := testCtx(t)
	old, err := b.Acquire(ctx, attempt("k", "same"))
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, old.Status)
	_, err = cli.Delete(ctx, testPrefix+"k") // the lease ran out, say
	require.NoError(t, err)
	newer, err := b.Acquire(ctx, attempt("k", "same"))
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, newer.Status)
	require.Greater(t, newer.Token, old.Token)

	stale := backend.Lease{Key: "k", Owner: "same", Token: old.Token, TTL: time.Minute}
	left, err := b.Release(ctx, stale)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), left, "the old holding is gone")
	got, err := b.Extend(ctx, []backend.Lease{stale})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Gone}, got)
	ttl, err := b.TTL(ctx, stale)
	require.NoError(t, err)
	assert.Negative(t, ttl)

	r, err := cli.Get(ctx, testPrefix+"k")
	require.NoError(t, err)
	require.Len(t, r.Kvs, 1, "the newer holder's key stays")
	assert.Equal(t, newer.Token, r.Kvs[0].CreateRevision)
	left, err = b.Release(ctx, backend.Lease{Key: "k", Owner: "same", Token: newer.Token})
	require.NoError(t, err)
	assert.Zero(t, left)
}

// Held reports the holder's remaining lease (its TTL and the reuse window
// at most), for the poll; the attempt's own lease is kept for the next
// attempt, neither revoked nor left to expire unused.
func TestHeldReportsRemainingLease(t *testing.T) {
	s := server(t)
	b, cli := driver(t, s)
	ctx := testCtx(t)
	_, err := b.Acquire(ctx, backend.Attempt{Key: "h", Owner: "a", TTL: 30 * time.Second})
	require.NoError(t, err)
	g, err := b.Acquire(ctx, backend.Attempt{Key: "h", Owner: "b", TTL: time.Second})
	require.NoError(t, err)
	assert.Equal(t, backend.Held, g.Status)
	assert.Greater(t, g.Remaining, 20*time.Second)
	assert.LessOrEqual(t, g.Remaining, etcddriver.LeaseTTL(30*time.Second))
	leases, err := cli.Leases(ctx)
	require.NoError(t, err)
	assert.Len(t, leases.Leases, 2, "the holder's lease and the attempt's")
	assert.Equal(t, 1, etcddriver.Pooled(b), "the attempt's, kept")
}

// The token base is added to every token and taken off again; a token not
// above it is bad input.
func TestTokenBase(t *testing.T) {
	s := server(t)
	const base = 1_800_000_000_000_000
	b, _ := driver(t, s, etcddriver.WithTokenBase(base))
	ctx := testCtx(t)
	g, err := b.Acquire(ctx, attempt("b", "o"))
	require.NoError(t, err)
	assert.Greater(t, g.Token, int64(base))
	left, err := b.Release(ctx, backend.Lease{Key: "b", Owner: "o", Token: g.Token})
	require.NoError(t, err)
	assert.Zero(t, left)
	_, err = b.Release(ctx, backend.Lease{Key: "b", Owner: "o", Token: 7})
	assert.ErrorIs(t, err, etcddriver.ErrInvalid)
}

// A lease with under a second left is still held: etcd tells what a lease
// has left in whole seconds, rounded down, so it says 0, and TTL says 0,
// not "gone"; through the Locker the lock is neither lost nor reported
// not held.
func TestTTLUnderASecondIsHeld(t *testing.T) {
	c := server(t)
	require.Equal(t, time.Second, minLease(t, c), "the test's premise: 1 s leases")
	b, _ := driver(t, c)
	ctx := testCtx(t)
	g, err := b.Acquire(ctx, backend.Attempt{Key: "s", Owner: "o", TTL: time.Second})
	require.NoError(t, err)
	l := backend.Lease{Key: "s", Owner: "o", Token: g.Token}
	// A pooled lease outlives the lock's TTL by its reuse window (lease.go):
	// ask until etcd reports under a second left, rounded down to 0. Every
	// answer until then must say held, that one included.
	var last time.Duration
	require.Eventually(t, func() bool {
		ttl, err := b.TTL(ctx, l)
		if err != nil {
			return false
		}
		last = ttl
		return ttl <= 0
	}, 10*time.Second, 10*time.Millisecond)
	assert.Zero(t, last, "under a second left is held, not gone")

	lk, err := lockerOn(t, b).Lock(ctx, "u", mutex.WithTTL(time.Second))
	require.NoError(t, err)
	_, err = lk.TTL(ctx)
	require.NoError(t, err, "held")
	require.NoError(t, lk.Context().Err())
	require.NoError(t, lk.Release(ctx))
}

// A lock key in etcd is the Driver's prefix and the Locker's key:
// "redfence:" by default, the keys a Locker over etcd always wrote; an
// election's journal sits beside it. Inspect and List take and show the key
// without the prefix, and name the etcd key; List shows the prefix's keys
// alone.
func TestKeysUnderThePrefix(t *testing.T) {
	s := server(t)
	ctx := testCtx(t)
	_, err := s.Client(t).Put(ctx, "other/x", "x") // no Driver's key
	require.NoError(t, err)
	for _, tc := range []struct {
		name   string
		opts   []etcddriver.Option
		prefix string
	}{
		{"default", nil, "redfence:"},
		{"WithPrefix", []etcddriver.Option{etcddriver.WithPrefix("app/")}, "app/"},
		{"empty", []etcddriver.Option{etcddriver.WithPrefix("")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cli := s.Client(t)
			d, err := etcddriver.New(cli, tc.opts...)
			require.NoError(t, err)
			l := lockerOn(t, d)
			key := "acct/" + tc.name
			lk, err := l.Lock(ctx, key, mutex.WithTTL(time.Minute))
			require.NoError(t, err)
			r, err := cli.Get(ctx, tc.prefix+key)
			require.NoError(t, err)
			require.Len(t, r.Kvs, 1, "the lock's etcd key")
			assert.Equal(t, lk.Token(), r.Kvs[0].CreateRevision)

			in, err := operator(t, l).Inspect(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, key, in.Key)
			assert.Equal(t, tc.prefix+key, in.Name)
			assert.Equal(t, lk.Token(), in.Token)

			page, err := d.List(ctx, backend.ListRequest{Count: 100})
			require.NoError(t, err)
			listed := map[string]string{}
			for _, k := range page.Keys {
				listed[k.Key] = k.Name
			}
			assert.Contains(t, listed, key)
			if tc.prefix != "" {
				assert.Equal(t, map[string]string{key: tc.prefix + key}, listed, "the prefix's keys alone")
			} else {
				assert.Contains(t, listed, "other/x", "every key is under the empty prefix")
			}

			ok, err := d.AppendTerm(ctx, "election:"+tc.name, backend.TermRecord{Term: lk.Token(), Value: "v", At: time.Now()})
			require.NoError(t, err)
			require.True(t, ok)
			r, err = cli.Get(ctx, tc.prefix+"election:"+tc.name+"\x00terms")
			require.NoError(t, err)
			assert.Len(t, r.Kvs, 1, "the journal beside the lock key")
			require.NoError(t, lk.Release(ctx))
		})
	}
}

// A bad option is refused by New, before anything is sent: a prefix with a
// NUL byte (which sets the Driver's records apart), a negative token base.
func TestNewRefusesBadOptions(t *testing.T) {
	for name, opt := range map[string]etcddriver.Option{
		"NUL in prefix": etcddriver.WithPrefix("a\x00"),
		"negative base": etcddriver.WithTokenBase(-1),
	} {
		t.Run(name, func(t *testing.T) {
			d, err := etcddriver.New(noServer{}, opt, nil)
			assert.Nil(t, d)
			assert.ErrorIs(t, err, etcddriver.ErrInvalid)
			assert.ErrorIs(t, err, mutex.ErrInvalid)
			assert.ErrorContains(t, err, "etcddriver: ")
		})
	}
	d, err := etcddriver.New(noServer{}, nil)
	require.NoError(t, err, "a nil Option is ignored")
	require.NoError(t, d.Close())
}
