package mutextest

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// The bytes on the wire are pinned: the key names, the stored values'
// shape, the queue, the audit stream and the release channel, for a
// standalone server, a 3-master Cluster and Redlock over 3 nodes. Processes
// on two releases exclude each other during a rolling upgrade only while
// these stay the same; a change here is a breaking change.
func TestWireFormat(t *testing.T) {
	t.Run("standalone", func(t *testing.T) {
		c, _ := redistest.Redis(t)
		w := wire{servers: []redis.UniversalClient{c}, queue: true, prefix: redisdriver.WithPrefix("wire:")}
		w.run(t, func(opts ...any) *mutex.Locker { return newLocker(t, c, opts...) })
	})
	t.Run("cluster", func(t *testing.T) {
		c := redistest.RedisCluster(t, 3).Client
		w := wire{servers: []redis.UniversalClient{c}, queue: true, sharded: true, prefix: redisdriver.WithPrefix("wire:")}
		w.run(t, func(opts ...any) *mutex.Locker { return newLocker(t, c, opts...) })
	})
	t.Run("redlock", func(t *testing.T) {
		clients, _ := redlockNodes(t, 3)
		w := wire{servers: clients, prefix: redlockdriver.WithPrefix("wire:")}
		w.run(t, func(opts ...any) *mutex.Locker { return newRedlock(t, clients, opts...) })
	})
}

// wire is one deployment: its servers (one client, or Redlock's nodes,
// each of which holds every key), whether it keeps the queue of Lockers,
// whether its channel is sharded, and its driver's option for the prefix
// "wire:".
type wire struct {
	servers []redis.UniversalClient
	queue   bool
	sharded bool
	prefix  any
}

const (
	ownerA = `[0-9a-f]{32}@h=host-a&p=7&s=svc`
	idB    = `[0-9a-f]{32}@h=host-b&p=8`
)

func (w wire) run(t *testing.T, newL func(...any) *mutex.Locker) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := newL(w.prefix, mutex.WithOwnerInfo(mutex.OwnerInfo{Host: "host-a", PID: 7, Service: "svc"}))
	b := newL(w.prefix, mutex.WithOwnerInfo(mutex.OwnerInfo{Host: "host-b", PID: 8}))

	lk, err := a.Lock(ctx, "k", mutex.WithTTL(30*time.Second), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	w.expect(t, ctx, "held", map[string]string{
		"wire:{k}": fmt.Sprintf(`string %d 1 \d{16}\+30000 0 %s`, lk.Token(), ownerA),
	})
	for _, c := range w.servers {
		pttl, err := c.PTTL(ctx, "wire:{k}").Result()
		require.NoError(t, err)
		assert.Greater(t, pttl, 30*time.Second, "the fencing counter outlives the lease")
	}

	got := make(chan *mutex.Lock, 1)
	go func() {
		wl, err := b.Lock(ctx, "k", mutex.WithTTL(30*time.Second), mutex.WithAutoRenew(false))
		assert.NoError(t, err)
		got <- wl
	}()
	waiting := map[string]string{"wire:{k}": fmt.Sprintf(`string %d 1 \d{16}\+30000 1 %s`, lk.Token(), ownerA)}
	if w.queue {
		waiting["wire:{k}:q"] = `zset ` + idB + `=\d{16}`
	}
	w.expect(t, ctx, "waited for", waiting)

	msgs := w.subscribe(t, ctx, "wire:{k}:released")
	require.NoError(t, lk.Release(ctx))
	reserved := "" // Redlock reserves for nobody
	if w.queue {
		reserved = idB
	}
	for _, m := range msgs {
		select {
		case msg := <-m:
			assert.Regexp(t, `^`+reserved+`$`, msg.Payload, "the release channel names the Locker it reserved for")
		case <-ctx.Done():
			t.Fatal("no release notification on wire:{k}:released")
		}
	}
	wl := <-got
	require.NotNil(t, wl)
	require.NoError(t, wl.Release(ctx))
	released := fmt.Sprintf(`string %d`, wl.Token())
	if len(w.servers) > 1 {
		// Release returns at a majority: a node whose release of lk landed
		// after b's attempt there (it answered "held") keeps lk's token,
		// released, and b's release does not touch it.
		released = fmt.Sprintf(`string (%d|%d)`, wl.Token(), lk.Token())
	}
	w.expect(t, ctx, "released", map[string]string{"wire:{k}": released})

	lk, err = a.Lock(ctx, "k", mutex.WithTTL(30*time.Second), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	res, err := adminOf(t, b).ForceRelease(ctx, "k", admin.ForceOptions{By: "ops", Reason: "stuck"})
	require.NoError(t, err)
	require.Equal(t, lk.Token()+1, res.Floor)
	w.expect(t, ctx, "forced", map[string]string{
		"wire:{k}": fmt.Sprintf(`string %d`, res.Floor),
		"wire:{k}:audit": fmt.Sprintf(`stream key k token %d floor %d owner %s count 1 by ops reason stuck`,
			lk.Token(), res.Floor, ownerA),
	})
	for _, c := range w.servers {
		pttl, err := c.PTTL(ctx, "wire:{k}:audit").Result()
		require.NoError(t, err)
		assert.InDelta(t, float64(30*24*time.Hour), float64(pttl), float64(time.Hour), "the audit stream lives 30 days")
	}

	braces, err := a.Lock(ctx, "a{b}", mutex.WithTTL(30*time.Second), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	sum := sha1.Sum([]byte("a{b}"))
	w.expect(t, ctx, "a key with braces", map[string]string{
		"wire:{k}":       fmt.Sprintf(`string %d`, res.Floor),
		"wire:{k}:audit": `stream .*`,
		"wire:{" + hex.EncodeToString(sum[:]) + "}a{b}": fmt.Sprintf(`string %d 1 \d{16}\+30000 0 %s`, braces.Token(), ownerA),
	})
	require.NoError(t, braces.Release(ctx))
}

// The keys of a LockAll hold what a Lock of each would: the same value, a
// token each, and a key TTL past the lease; released, the token alone.
func TestWireFormatLockAll(t *testing.T) {
	for _, s := range multiSetups {
		t.Run(s.name, func(t *testing.T) {
			servers := s.servers(t)
			w := wire{servers: servers}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			a := s.locker(t, servers, s.prefix("wire:"), mutex.WithOwnerInfo(mutex.OwnerInfo{Host: "host-a", PID: 7, Service: "svc"}))
			ls, err := a.LockAll(ctx, []string{"m2", "m1"}, mutex.WithTTL(30*time.Second), mutex.WithAutoRenew(false))
			require.NoError(t, err)
			w.expect(t, ctx, "held", map[string]string{
				"wire:{m1}": fmt.Sprintf(`string %d 1 \d{16}\+30000 0 %s`, ls.TokenOf("m1"), ownerA),
				"wire:{m2}": fmt.Sprintf(`string %d 1 \d{16}\+30000 0 %s`, ls.TokenOf("m2"), ownerA),
			})
			for _, c := range servers {
				pttl, err := c.PTTL(ctx, "wire:{m1}").Result()
				require.NoError(t, err)
				assert.Greater(t, pttl, 30*time.Second, "the fencing counter outlives the lease")
			}
			require.NoError(t, ls.Release(ctx))
			w.expect(t, ctx, "released", map[string]string{
				"wire:{m1}": fmt.Sprintf(`string %d`, ls.TokenOf("m1")),
				"wire:{m2}": fmt.Sprintf(`string %d`, ls.TokenOf("m2")),
			})
		})
	}
}

// expect waits until every server holds exactly want's keys, each value
// matching its pattern whole (see dump), and fails with what they held.
func (w wire) expect(t *testing.T, ctx context.Context, what string, want map[string]string) {
	t.Helper()
	var last string
	for {
		ok := true
		var seen []string
		for i, c := range w.servers {
			got, err := dump(ctx, c)
			require.NoError(t, err)
			seen = append(seen, fmt.Sprintf("server %d: %q", i, got))
			ok = ok && matches(got, want)
		}
		if ok {
			return
		}
		last = strings.Join(seen, "\n")
		select {
		case <-ctx.Done():
			t.Fatalf("%s: want %q, servers held\n%s", what, want, last)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func matches(got, want map[string]string) bool {
	if len(got) != len(want) {
		return false
	}
	for k, pat := range want {
		v, ok := got[k]
		if !ok || !regexp.MustCompile(`^(?:`+pat+`)$`).MatchString(v) {
			return false
		}
	}
	return true
}

// dump reads every key of c (every master of a Cluster): "string <value>",
// "zset <member>=<score>,…", "stream <field> <value> …" (entries joined by
// "; ", ids left out), or the type's name.
func dump(ctx context.Context, c redis.UniversalClient) (map[string]string, error) {
	out := map[string]string{}
	var mu sync.Mutex
	one := func(ctx context.Context, n server) error {
		keys, err := n.Keys(ctx, "*").Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			v, err := dumpKey(ctx, n, k)
			if err != nil {
				return err
			}
			mu.Lock()
			out[k] = v
			mu.Unlock()
		}
		return nil
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return one(ctx, m) })
		return out, err
	}
	return out, one(ctx, c)
}

// server is one Redis server's commands, raw ones included.
type server interface {
	redis.Cmdable
	Do(ctx context.Context, args ...any) *redis.Cmd
}

func dumpKey(ctx context.Context, n server, k string) (string, error) {
	typ, err := n.Type(ctx, k).Result()
	if err != nil {
		return "", err
	}
	switch typ {
	case "string":
		v, err := n.Get(ctx, k).Result()
		return "string " + v, err
	case "zset":
		zs, err := n.ZRangeWithScores(ctx, k, 0, -1).Result()
		parts := make([]string, len(zs))
		for i, z := range zs {
			parts[i] = fmt.Sprintf("%v=%.0f", z.Member, z.Score)
		}
		return "zset " + strings.Join(parts, ","), err
	case "stream": // raw, for the fields' order
		xs, err := n.Do(ctx, "XRANGE", k, "-", "+").Slice()
		var entries []string
		for _, x := range xs {
			e, _ := x.([]any)
			if len(e) != 2 {
				return "", fmt.Errorf("XRANGE %s: entry %v", k, x)
			}
			var f []string
			for _, v := range e[1].([]any) {
				f = append(f, fmt.Sprint(v))
			}
			entries = append(entries, strings.Join(f, " "))
		}
		return "stream " + strings.Join(entries, "; "), err
	}
	return typ, nil
}

// subscribe listens on ch where a release publishes it: the one deployment
// (sharded on Cluster), or every Redlock node.
func (w wire) subscribe(t *testing.T, ctx context.Context, ch string) []<-chan *redis.Message {
	t.Helper()
	var out []<-chan *redis.Message
	for _, c := range w.servers {
		var sub *redis.PubSub
		if w.sharded {
			sub = c.SSubscribe(ctx, ch)
		} else {
			sub = c.Subscribe(ctx, ch)
		}
		t.Cleanup(func() { _ = sub.Close() })
		_, err := sub.Receive(ctx) // the subscription's confirmation
		require.NoError(t, err)
		out = append(out, sub.Channel())
	}
	return slices.Clip(out)
}
