package redisdriver_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redisdriver"
)

func testHandOff(t *testing.T, d *redisdriver.Driver) {
	ctx := context.Background()
	k := key(t, "k")
	from := acquire(t, d, k, "a", 10*time.Second)
	left, g, err := d.HandOff(ctx, from, backend.Attempt{Key: k, Owner: "b", TTL: 5 * time.Second})
	require.NoError(t, err)
	require.EqualValues(t, 0, left)
	require.Equal(t, backend.Acquired, g.Status)
	require.Greater(t, g.Token, from.Token)
	require.NotNil(t, g.Handle)
	next := backend.Lease{Key: k, Owner: "b", Token: g.Token, Handle: g.Handle}
	ttl, err := d.TTL(ctx, next)
	require.NoError(t, err)
	assert.Greater(t, ttl, 4*time.Second, "the lease the next owner asked for")

	left, _, err = d.HandOff(ctx, from, backend.Attempt{Key: k, Owner: "c", TTL: time.Second})
	require.NoError(t, err)
	assert.EqualValues(t, -1, left, "from holds it no more")

	// A count left (re-entered in Redis): counted down, not handed off.
	_, err = d.Acquire(ctx, backend.Attempt{Key: k, Owner: "b", TTL: 5 * time.Second, Shared: true})
	require.NoError(t, err)
	left, g, err = d.HandOff(ctx, next, backend.Attempt{Key: k, Owner: "c", TTL: time.Second})
	require.NoError(t, err)
	assert.EqualValues(t, 1, left)
	assert.Nil(t, g.Handle)
	left, err = d.Release(ctx, next)
	require.NoError(t, err)
	assert.EqualValues(t, 0, left)
}

// testWatch: a release that frees a key a waiting Lock found held wakes the
// key's watcher, after ready.
func testWatch(t *testing.T, d *redisdriver.Driver) {
	ctx := context.Background()
	k := key(t, "k")
	l := acquire(t, d, k, "a", 10*time.Second)
	woken := make(chan struct{}, 8)
	ready, stop := d.Watch(k, func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	defer stop()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription was never confirmed")
	}
	// A waiter's attempt marks the lock waited-for: its release publishes.
	g, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "b", TTL: time.Second, Waiter: "locker-1"})
	require.NoError(t, err)
	require.Equal(t, backend.Held, g.Status)
	left, err := d.Release(ctx, l)
	require.NoError(t, err)
	require.EqualValues(t, 0, left)
	select {
	case <-woken:
	case <-time.After(5 * time.Second):
		t.Fatal("the release did not wake the watcher")
	}
	// Reserved for locker-1, which is in the queue: its attempt gets it.
	g, err = d.Acquire(ctx, backend.Attempt{Key: k, Owner: "b2", TTL: time.Second, Waiter: "locker-1", InQueue: true})
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, g.Status)
	_, err = d.Release(ctx, backend.Lease{Key: k, Owner: "b2", Token: g.Token, Handle: g.Handle})
	require.NoError(t, err)
}

// A release reserved for another Locker does not wake this Driver's
// watchers (no herd); one for any Locker, or for this Driver's, does.
func TestWatchReservedForAnother(t *testing.T) {
	c, _ := redistest.Redis(t)
	d := newDriver(t, c)
	ctx := context.Background()
	k := key(t, "k")
	_, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "x", TTL: time.Second, Waiter: "mine"})
	require.NoError(t, err)
	woken := make(chan string, 8)
	ready, stop := d.Watch(k, func() { woken <- "woken" })
	defer stop()
	<-ready
	ch := redisproto.ChannelOf(redisproto.LockKey(prefix, k))
	require.NoError(t, c.Publish(ctx, ch, "someone-else").Err())
	require.NoError(t, c.Publish(ctx, ch, "mine").Err())
	<-woken
	require.NoError(t, c.Publish(ctx, ch, "").Err())
	<-woken
	assert.Empty(t, woken, "the release for someone-else woke nobody")
}

func TestLeave(t *testing.T) {
	c, _ := redistest.Redis(t)
	d := newDriver(t, c)
	ctx := context.Background()
	k := key(t, "k")
	l := acquire(t, d, k, "a", 10*time.Second)
	g, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "b", TTL: time.Second, Waiter: "locker-1"})
	require.NoError(t, err)
	require.Equal(t, backend.Held, g.Status)
	queue := redisproto.QueueOf(redisproto.LockKey(prefix, k))
	members, err := c.ZRange(ctx, queue, 0, -1).Result()
	require.NoError(t, err)
	assert.Equal(t, []string{"locker-1"}, members)

	require.NoError(t, d.Leave(ctx, k, "locker-1"))
	n, err := c.Exists(ctx, queue).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "the queue is empty")
	left, err := d.Release(ctx, l)
	require.NoError(t, err)
	assert.EqualValues(t, 0, left)
	// Not reserved for the Locker that left: anyone may take it.
	acquire(t, d, k, "c", time.Second)
}

func TestAckReplicas(t *testing.T) {
	c, primary := redistest.Redis(t)
	d := newDriver(t, c)
	ctx := context.Background()
	l := acquire(t, d, key(t, "k"), "a", 10*time.Second)
	acked, err := d.AckReplicas(ctx, l, 1, 50*time.Millisecond)
	require.NoError(t, err)
	assert.Zero(t, acked, "no replica")
	_, err = d.AckReplicas(ctx, l, 1, 0)
	assert.ErrorIs(t, err, backend.ErrInvalid, "WAIT 0 would block for ever")

	replica := redistest.StartRedis(t, redistest.WithRedisArgs("--replicaof", "127.0.0.1", fmt.Sprint(primary.Port())))
	rc := replica.Client()
	defer rc.Close()
	require.Eventually(t, func() bool {
		info, _ := c.Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 20*time.Millisecond)
	l.TTL = 0 // the acquisition's lease
	acked, err = d.AckReplicas(ctx, l, 1, 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 1, acked)
	s, err := rc.Get(ctx, redisproto.LockKey(prefix, l.Key)).Result()
	require.NoError(t, err, "the replica has the lock")
	v, _ := redisproto.ParseValue(s)
	assert.Equal(t, l.Token, v.Token)
}

// Close stops the subscription and waits for every goroutine, calls given
// up on included; later calls still work, without goroutines.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	_, srv := redistest.Redis(t)
	proxy := testutil.Proxy(t, srv.Addr())
	pc, _ := plainClient(t, proxy.Addr(), 2*time.Second)
	require.NoError(t, pc.Ping(context.Background()).Err())
	before := goleak.IgnoreCurrent()

	d, err := redisdriver.New(pc, redisdriver.WithPrefix(prefix))
	require.NoError(t, err)
	k := key(t, "k")
	ready, stop := d.Watch(k, func() {})
	<-ready
	defer stop()
	proxy.SetLatency(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = d.Acquire(ctx, backend.Attempt{Key: k, Owner: "o", TTL: time.Second})
	cancel()
	require.ErrorIs(t, err, context.DeadlineExceeded, "given up on: a goroutine still runs it")
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "idempotent")
	goleak.VerifyNone(t, before)

	proxy.Heal()
	require.NoError(t, d.Abandon(context.Background(), k, "o"), "works after Close")
	ready, _ = d.Watch(k, func() {})
	assert.NotNil(t, ready)
	goleak.VerifyNone(t, before)
}

// On Cluster, WAIT runs on the lock's master: a pipeline would send the
// keyless command to a master of its own choosing, whose replicas say
// nothing about the lock.
func TestAckReplicasCluster(t *testing.T) {
	cl := redistest.RedisCluster(t, 3, redistest.WithReplicas(1))
	d := newDriver(t, cl.Client)
	ctx := context.Background()
	l := acquire(t, d, key(t, "k"), "a", 10*time.Second)
	master, err := cl.Client.MasterForKey(ctx, redisproto.LockKey(prefix, l.Key))
	require.NoError(t, err)
	i := slices.IndexFunc(cl.Masters, func(m *redistest.RedisServer) bool { return m.Addr() == master.Options().Addr })
	require.GreaterOrEqual(t, i, 0)

	acked, err := d.AckReplicas(ctx, l, 1, 2*time.Second)
	require.NoError(t, err)
	assert.Equal(t, 1, acked)

	replica := cl.Replicas[i][0]
	replica.Pause()
	defer replica.Resume()
	acked, err = d.AckReplicas(ctx, l, 1, 200*time.Millisecond)
	require.NoError(t, err)
	assert.Zero(t, acked, "the lock's replica is paused, whatever the others do")
}
