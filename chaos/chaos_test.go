package chaos_test

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/chaoskit"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
)

var duration = flag.Duration("chaos.duration", 0, "how long each setup runs under faults (0: the bounded run of make test)")

// newWorld is a run whose register is a PostgreSQL table protected by
// fenced's trigger.
func newWorld(t *testing.T, name string) *chaoskit.World {
	return newWorldOn(t, chaoskit.PGRegister(t, name))
}

func newWorldOn(t *testing.T, reg chaoskit.Register) *chaoskit.World {
	return chaoskit.New(t, reg, chaoskit.Config{Long: *duration})
}

func TestChaosSingleNode(t *testing.T) {
	w := newWorld(t, "single")
	singleNode(t, w)
	w.Run(20 * time.Second)
	w.Check("single")
}

// restartedEmpty is the single-node setup's fault that loses held locks.
const restartedEmpty = "redis killed, restarted empty"

// singleNode gives w its clients' Lockers on one redis-server, each behind
// its own proxy, and the faults of that setup.
func singleNode(t *testing.T, w *chaoskit.World) {
	_, srv := redistest.Redis(t)
	proxies := make([]*testutil.TCPProxy, chaoskit.Clients)
	for i := range chaoskit.Clients {
		proxies[i] = testutil.Proxy(t, srv.Addr())
		c := redis.NewClient(&redis.Options{Addr: proxies[i].Addr(), MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
		l, err := redistest.NewLocker(c)
		require.NoError(t, err)
		w.Lockers = append(w.Lockers, l)
		t.Cleanup(func() { _ = l.Close(); _ = c.Close() })
		p := proxies[i]
		w.Isolate = append(w.Isolate, func() func() { p.BlackHole(); return p.Heal })
	}
	w.LossyFaults = []string{restartedEmpty}
	w.Faults = []chaoskit.Fault{
		{Name: "redis paused past the lease", Apply: func(*rand.Rand) func() { srv.Pause(); return srv.Resume }},
		{Name: restartedEmpty, Apply: func(*rand.Rand) func() { srv.Restart(); return func() {} }},
		{Name: "client latency", Apply: func(rng *rand.Rand) func() {
			p := proxies[rng.IntN(chaoskit.Clients)]
			p.SetLatency(time.Duration(20+rng.IntN(80)) * time.Millisecond)
			return func() { p.SetLatency(0) }
		}},
		{Name: "client partitioned (black hole)", Apply: func(rng *rand.Rand) func() {
			p := proxies[rng.IntN(chaoskit.Clients)]
			p.BlackHole()
			return p.Heal
		}},
		w.StallFault(),
	}
}

func TestChaosRedlock(t *testing.T) {
	w := newWorld(t, "redlock")
	redlock(t, w)
	w.Run(15 * time.Second)
	w.Check("redlock")
}

// redlock gives w its clients' Lockers, each a Redlock over its own
// connections to five redis-servers, and the faults of that setup.
func redlock(t *testing.T, w *chaoskit.World) { redlockVia(t, w, false) }

// minorityRestarted is the Redlock setup's fault that loses held locks on
// up to two nodes: with a majority of three, a lock may then be granted
// again.
const minorityRestarted = "minority killed, restarted empty"

// redlockVia is redlock; with proxied, each client reaches each node
// through a proxy of its own, so that w can cut a client off (Isolate).
func redlockVia(t *testing.T, w *chaoskit.World, proxied bool) {
	_, srvs := redistest.RedisN(t, 5)
	for range chaoskit.Clients {
		nodes := make([]redis.UniversalClient, len(srvs))
		var proxies []*testutil.TCPProxy
		for j, s := range srvs {
			addr := s.Addr()
			if proxied {
				p := testutil.Proxy(t, addr)
				proxies = append(proxies, p)
				addr = p.Addr()
			}
			c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
			nodes[j] = c
			t.Cleanup(func() { _ = c.Close() })
		}
		if proxied {
			w.Isolate = append(w.Isolate, func() func() {
				for _, p := range proxies {
					p.BlackHole()
				}
				return func() {
					for _, p := range proxies {
						p.Heal()
					}
				}
			})
		}
		l, err := redistest.NewRedlock(nodes)
		require.NoError(t, err)
		w.Lockers = append(w.Lockers, l)
		t.Cleanup(func() { _ = l.Close() })
	}
	some := func(rng *rand.Rand, n int) []*redistest.RedisServer {
		idx := rng.Perm(len(srvs))[:n]
		out := make([]*redistest.RedisServer, n)
		for i, j := range idx {
			out[i] = srvs[j]
		}
		return out
	}
	each := func(ss []*redistest.RedisServer, f func(*redistest.RedisServer)) {
		for _, s := range ss {
			f(s)
		}
	}
	w.Faults = []chaoskit.Fault{
		{Name: "minority paused", Apply: func(rng *rand.Rand) func() {
			ss := some(rng, 1+rng.IntN(2))
			each(ss, (*redistest.RedisServer).Pause)
			return func() { each(ss, (*redistest.RedisServer).Resume) }
		}},
		{Name: "majority paused", Apply: func(rng *rand.Rand) func() {
			ss := some(rng, 3)
			each(ss, (*redistest.RedisServer).Pause)
			return func() { each(ss, (*redistest.RedisServer).Resume) }
		}},
		{Name: minorityRestarted, Apply: func(rng *rand.Rand) func() {
			ss := some(rng, 1+rng.IntN(2))
			each(ss, (*redistest.RedisServer).Kill)
			return func() { each(ss, (*redistest.RedisServer).Restart) }
		}},
		w.StallFault(),
	}
	w.LossyFaults = []string{minorityRestarted}
}

// TestChaosSentinel: a primary with an asynchronous replica under Sentinel.
// A failover while a lock is held can hand clients a primary that lacks the
// lock (the classic replication hole); the fence must still hold.
func TestChaosSentinel(t *testing.T) {
	w := newWorld(t, "sentinel")
	sentinel(t, w, false)
	w.Run(15 * time.Second)
	w.Check("sentinel")
}

// failedOver is the Sentinel setup's fault that may lose held locks: the
// replica promoted may lack the latest writes.
const failedOver = "failover"

// sentinel gives w its clients' Lockers, each with its own client of a
// primary and an asynchronous replica under Sentinel, and the faults of
// that setup. demoteOld ends a failover's loss when it returns (demote);
// the lock workload keeps Sentinel's own 10 s, when the old primary still
// grants locks beside the new one, for its fence to refuse.
func sentinel(t *testing.T, w *chaoskit.World, demoteOld bool) {
	set := redistest.Sentinel(t)
	for range chaoskit.Clients {
		c := set.Client()
		l, err := redistest.NewLocker(c)
		require.NoError(t, err)
		w.Lockers = append(w.Lockers, l)
		t.Cleanup(func() { _ = l.Close(); _ = c.Close() })
	}
	w.LossyFaults = []string{failedOver}
	w.Faults = []chaoskit.Fault{
		{Name: failedOver, Apply: func(*rand.Rand) func() {
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			old, err := set.Primary(ctx)
			if err == nil {
				err = set.Failover(ctx, 10*time.Second)
			}
			if err == nil && demoteOld {
				err = demote(ctx, set, old)
			}
			if err != nil {
				t.Logf("failover: %v", err) // counted anyway: it was attempted
			}
			return func() {}
		}},
		{Name: "primary paused past the lease", Apply: func(*rand.Rand) func() {
			addr, err := set.Primary(context.Background())
			srv := set.Server(addr)
			if err != nil || srv == nil {
				return func() {}
			}
			srv.Pause()
			return srv.Resume
		}},
		w.StallFault(),
	}
}

// demote makes old, a failover's old primary, a replica of the new one
// at once. Sentinel does so only at its next look at old (every 10 s);
// until then old takes writes from the clients not yet moved over (locks
// and permits beside the new primary's), which its demotion discards: the
// failover's loss lasts until then, and the fault's Apply with it.
func demote(ctx context.Context, set *redistest.SentinelSet, old string) error {
	srv := set.Server(old)
	if srv == nil {
		return fmt.Errorf("the old primary %s is not one of the set's servers", old)
	}
	primary, err := set.Primary(ctx)
	if err != nil {
		return err
	}
	host, port, err := net.SplitHostPort(primary)
	if err != nil {
		return err
	}
	c := srv.Client()
	defer c.Close()
	return c.ReplicaOf(ctx, host, port).Err()
}
