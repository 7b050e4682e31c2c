package mutextest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// multiSetup is a deployment LockAll runs on: its servers, whose raw keys
// say whether a key is held anywhere, and Lockers over them.
type multiSetup struct {
	name    string
	servers func(t *testing.T) []redis.UniversalClient
	redlock bool
}

var multiSetups = []multiSetup{
	{name: "standalone", servers: func(t *testing.T) []redis.UniversalClient {
		c, _ := redistest.Redis(t)
		return []redis.UniversalClient{c}
	}},
	{name: "cluster", servers: func(t *testing.T) []redis.UniversalClient {
		return []redis.UniversalClient{redistest.RedisCluster(t, 3).Client}
	}},
	{name: "redlock", redlock: true, servers: func(t *testing.T) []redis.UniversalClient {
		clients, _ := redlockNodes(t, 3)
		return clients
	}},
}

// locker is a Locker over the setup's servers; opts are mutex options and
// those of the setup's driver.
func (s multiSetup) locker(t *testing.T, servers []redis.UniversalClient, opts ...any) *mutex.Locker {
	if s.redlock {
		return newRedlock(t, servers, opts...)
	}
	return newLocker(t, servers[0], opts...)
}

// prefix is the option of the setup's driver that puts p on its keys.
func (s multiSetup) prefix(p string) any {
	if s.redlock {
		return redlockdriver.WithPrefix(p)
	}
	return redisdriver.WithPrefix(p)
}

// lockers starts the deployment and n Lockers over it.
func (s multiSetup) lockers(t *testing.T, n int) ([]*mutex.Locker, []redis.UniversalClient) {
	servers := s.servers(t)
	ls := make([]*mutex.Locker, n)
	for i := range ls {
		ls[i] = s.locker(t, servers)
	}
	return ls, servers
}

// heldOn lists the keys of l that a majority of servers hold (raw values
// read straight from the servers; a free key keeps only its token): one
// server for a single deployment, Redlock's quorum otherwise. (A Redlock
// node that granted after the quorum had decided is released once its
// reply arrives, in the background: the Redlock driver's tests cover it.)
func heldOn(t *testing.T, servers []redis.UniversalClient, l *mutex.Locker, keys ...string) []string {
	t.Helper()
	var held []string
	for _, k := range keys {
		n := 0
		for _, c := range servers {
			s, err := c.Get(context.Background(), redisproto.LockKey(redisproto.DefaultPrefix, k)).Result()
			if err == redis.Nil {
				continue
			}
			require.NoError(t, err)
			if v, ok := redisproto.ParseValue(s); ok && !v.Released && v.Count > 0 {
				n++
			}
		}
		if n >= len(servers)/2+1 {
			held = append(held, k)
		}
	}
	return held
}

// accounts returns 8 account keys for l: on a Cluster, four pairs, each
// pair in a slot of its own, so that transfers take keys of one slot in
// one script and keys of several slots group by group.
func accounts(l *mutex.Locker) []string {
	if mutexhooks.GroupOf(l, "x") <= 0 && mutexhooks.GroupOf(l, "y") <= 0 {
		return []string{"acct:0", "acct:1", "acct:2", "acct:3", "acct:4", "acct:5", "acct:6", "acct:7"}
	}
	bySlot := map[int][]string{}
	var out []string
	for i := 0; len(out) < 8; i++ {
		k := fmt.Sprintf("acct:%d", i)
		g := mutexhooks.GroupOf(l, k)
		if bySlot[g] = append(bySlot[g], k); len(bySlot[g]) == 2 {
			out = append(out, bySlot[g]...)
		}
	}
	return out
}

// transfers runs workers goroutines over lockers, each making rounds
// transfers among accounts: LockAll of two or three accounts given in a
// random order (now and then one twice), a check that no other call holds
// any of them and that each token grew, a move of money by read and write
// (an overlap would lose some), Unlock. Every call must return, with its
// keys, within its deadline: a deadlock would end calls with
// context.DeadlineExceeded.
func transfers(t *testing.T, lockers []*mutex.Locker, accounts []string, workers, rounds int) {
	t.Helper()
	balance := map[string]*atomic.Int64{}
	inside := map[string]*atomic.Int32{}
	last := map[string]*atomic.Int64{}
	for _, a := range accounts {
		balance[a], inside[a], last[a] = new(atomic.Int64), new(atomic.Int32), new(atomic.Int64)
		balance[a].Store(1000)
	}
	var overlaps, backwards atomic.Int32
	var wg sync.WaitGroup
	for w := range workers {
		l := lockers[w%len(lockers)]
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 37))
			for range rounds {
				keys := pick(r, accounts)
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				ls, err := l.LockAll(ctx, keys)
				if !assert.NoError(t, err, "every call returns with its keys within its deadline") {
					cancel()
					return
				}
				for _, k := range ls.Keys() {
					if inside[k].Add(1) != 1 {
						overlaps.Add(1)
					}
					if tok := ls.TokenOf(k); tok <= last[k].Load() {
						backwards.Add(1)
					} else {
						last[k].Store(tok)
					}
				}
				amount := int64(r.IntN(50))
				from, to := balance[keys[0]], balance[keys[1]]
				f := from.Load()
				runtime.Gosched() // widen the window an overlap would need
				from.Store(f - amount)
				to.Store(to.Load() + amount)
				for _, k := range ls.Keys() {
					inside[k].Add(-1)
				}
				assert.NoError(t, ls.Release(ctx))
				cancel()
			}
		})
	}
	wg.Wait()
	var sum int64
	for _, a := range accounts {
		sum += balance[a].Load()
	}
	assert.Equal(t, int64(1000*len(accounts)), sum, "money is conserved")
	assert.Zero(t, overlaps.Load(), "two holders of one key at once")
	assert.Zero(t, backwards.Load(), "a key's token did not grow")
}

// pick is a transfer's keys: two or three accounts in a random order, now
// and then one of them twice.
func pick(r *rand.Rand, accounts []string) []string {
	perm := r.Perm(len(accounts))[:2+r.IntN(2)]
	keys := make([]string, len(perm))
	for i, p := range perm {
		keys[i] = accounts[p]
	}
	if r.IntN(4) == 0 {
		keys = append(keys, keys[r.IntN(len(keys))])
	}
	return keys
}

// 16 workers over 2 Lockers, random transfers among 8 accounts, keys in a
// random order: no deadlock, no two holders of a key, money conserved.
func TestLockAllTransfers(t *testing.T) {
	for _, s := range multiSetups {
		t.Run(s.name, func(t *testing.T) {
			lockers, _ := s.lockers(t, 2)
			accts := accounts(lockers[0])
			if s.name == "cluster" {
				slots := map[int]bool{}
				for _, a := range accts {
					slots[mutexhooks.GroupOf(lockers[0], a)] = true
				}
				require.Len(t, slots, 4, "four slots, two accounts each")
			}
			rounds := 25
			if s.name == "redlock" {
				rounds = 10
			}
			transfers(t, lockers, accts, 16, rounds)
		})
	}
}

// blockLast has another Locker hold the last key of keys in the order
// LockAll takes them, starts l.LockAll(keys) under ctx, and returns once
// that call holds every other key and waits for the last. done delivers
// the call's error.
func blockLast(t *testing.T, ctx context.Context, l, other *mutex.Locker, keys []string) (held []string, blocked string, done <-chan error) {
	t.Helper()
	order := mutexhooks.OrderOf(l, keys)
	blocked = order[len(order)-1]
	lk, err := other.Lock(context.Background(), blocked)
	require.NoError(t, err)
	t.Cleanup(func() { _ = lk.Release(context.Background()) })
	errs := make(chan error, 1)
	go func() {
		ls, err := l.LockAll(ctx, keys)
		if err == nil {
			_ = ls.Release(context.Background())
		}
		errs <- err
	}()
	require.Eventually(t, func() bool { return mutexhooks.WaitersOf(l, blocked) == 1 }, 30*time.Second, time.Millisecond,
		"LockAll waits for %s", blocked)
	return order[:len(order)-1], blocked, errs
}

// A call cancelled while it holds some keys and waits for another releases
// the keys it holds before it returns.
func TestLockAllCancelledReleasesWhatItTook(t *testing.T) {
	for _, s := range multiSetups {
		t.Run(s.name, func(t *testing.T) {
			lockers, servers := s.lockers(t, 2)
			l := lockers[0]
			keys := []string{"c", "a", "d", "b"}
			ctx, cancel := context.WithCancel(context.Background())
			held, blocked, done := blockLast(t, ctx, l, lockers[1], keys)
			require.ElementsMatch(t, held, heldOn(t, servers, l, held...), "it holds the others while it waits")
			cancel()
			err := <-done
			assert.ErrorIs(t, err, mutex.ErrNotAcquired)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Empty(t, heldOn(t, servers, l, held...), "released before LockAll returned")
			assert.Equal(t, []string{blocked}, heldOn(t, servers, l, keys...), "only the other Locker's key is held")
			assert.Empty(t, adminOf(t, l).Held())
		})
	}
}

// Close during an acquisition: the call returns ErrClosed, and the keys it
// held are released by the time it returns.
func TestLockAllCloseReleasesWhatItTook(t *testing.T) {
	for _, s := range multiSetups {
		t.Run(s.name, func(t *testing.T) {
			lockers, servers := s.lockers(t, 2)
			l := lockers[0]
			keys := []string{"c", "a", "d", "b"}
			held, blocked, done := blockLast(t, context.Background(), l, lockers[1], keys)
			closed := make(chan error, 1)
			go func() { closed <- l.Close() }()
			assert.ErrorIs(t, <-done, mutex.ErrClosed)
			assert.Empty(t, heldOn(t, servers, l, held...), "released before LockAll returned")
			assert.NoError(t, <-closed)
			assert.Equal(t, []string{blocked}, heldOn(t, servers, l, keys...))
		})
	}
}

// The keys of one group go in one round trip, each with the value a single
// Lock writes: a single-key Locker and inspection see ordinary locks.
func TestLockAllOneRoundTrip(t *testing.T) {
	c, _ := redistest.Redis(t)
	l, single := newLocker(t, c), newLocker(t, c)
	ctx := context.Background()
	warm, err := l.LockAll(ctx, []string{"w1", "w2"}) // the script cached: EVALSHA alone
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))
	before, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	ls, err := l.LockAll(ctx, []string{"x", "y", "z", "y"})
	require.NoError(t, err)
	after, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Equal(t, 1, evalCalls(after)-evalCalls(before), "one script for the three keys")
	assert.Equal(t, []string{"x", "y", "z"}, ls.Keys())
	viewer := adminOf(t, l)
	for _, k := range ls.Keys() {
		info, err := viewer.Inspect(ctx, k)
		require.NoError(t, err)
		assert.Equal(t, admin.Held, info.State)
		assert.Equal(t, ls.TokenOf(k), info.Token)
		_, err = single.TryLock(ctx, k)
		assert.ErrorIs(t, err, mutex.ErrNotAcquired, "a single-key Locker sees %s held", k)
	}
	require.NoError(t, ls.Release(ctx))
	assert.ErrorIs(t, context.Cause(ls.Context()), mutex.ErrReleased)
	assert.ErrorIs(t, ls.Release(ctx), mutex.ErrNotHeld, "once")
	for _, k := range ls.Keys() {
		lk, err := single.TryLock(ctx, k)
		require.NoError(t, err)
		assert.Greater(t, lk.Token(), ls.TokenOf(k))
		require.NoError(t, lk.Release(ctx))
	}
}

// TryLockAll takes nothing when a key is held: it names the key, and the
// keys it could have taken stay free.
func TestTryLockAll(t *testing.T) {
	for _, s := range multiSetups {
		t.Run(s.name, func(t *testing.T) {
			lockers, servers := s.lockers(t, 2)
			l := lockers[0]
			ctx := context.Background()
			lk, err := lockers[1].Lock(ctx, "b")
			require.NoError(t, err)
			_, err = l.TryLockAll(ctx, []string{"c", "b", "a"})
			assert.ErrorIs(t, err, mutex.ErrNotAcquired)
			assert.NotErrorIs(t, err, mutex.ErrUnavailable)
			assert.Equal(t, []string{"b"}, heldOn(t, servers, l, "a", "b", "c"))
			require.NoError(t, lk.Release(ctx))
			ls, err := l.TryLockAll(ctx, []string{"c", "b", "a"})
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"a", "b", "c"}, heldOn(t, servers, l, "a", "b", "c"))
			require.NoError(t, ls.Release(ctx))
			assert.Empty(t, heldOn(t, servers, l, "a", "b", "c"))
		})
	}
}

// A key lost ends the set's context, with the key in the cause; Release
// still releases the others, and says one was lost.
func TestLockAllLoss(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	ls, err := l.LockAll(ctx, []string{"p", "q", "r"})
	require.NoError(t, err)
	_, err = adminOf(t, l).ForceRelease(ctx, "q", admin.ForceOptions{Reason: "test"})
	require.NoError(t, err)
	assert.ErrorIs(t, ls.Extend(ctx, 20*time.Second), mutex.ErrNotHeld, "q is gone")
	select {
	case <-ls.Context().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the loss of q did not end the set's context")
	}
	cause := context.Cause(ls.Context())
	assert.ErrorIs(t, cause, mutex.ErrLockLost)
	assert.ErrorContains(t, cause, `"q"`)
	assert.ErrorIs(t, ls.Extend(ctx, 20*time.Second), mutex.ErrNotHeld, "a lost set is extended no more")
	assert.ErrorIs(t, ls.Release(ctx), mutex.ErrNotHeld)
	assert.Empty(t, heldOn(t, []redis.UniversalClient{c}, l, "p", "q", "r"), "p and r released all the same")
	assert.ErrorIs(t, context.Cause(ls.Context()), mutex.ErrLockLost, "the loss stays the cause")
}
