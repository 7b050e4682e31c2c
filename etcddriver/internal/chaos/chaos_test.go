package chaos_test

import (
	"flag"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/chaoskit"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

var duration = flag.Duration("chaos.duration", 0, "how long the setup runs under faults (0: the bounded run of make test)")

const (
	// ttl is the Locker's lease. etcd's lease under it is whole seconds and
	// a reuse window (2 s here), so a holder cut off for longer than ttl
	// loses its lock well before anyone else can be granted the key.
	ttl = 500 * time.Millisecond
	// stall outlasts the key of a lock that is not renewed: its etcd lease
	// (2 s from no later than the grant) and the leader's sweep of expired
	// leases (every 500 ms).
	stall = 3 * time.Second
	// release outlasts an election (0.5-1.5 s here), which a release sent
	// meanwhile waits out: a failed release leaves the key to its lease,
	// which every new leader renews (etcd's lessor, on promotion).
	release = 3 * time.Second
)

// config is the etcd setup's run configuration, for both workloads.
func config() chaoskit.Config {
	return chaoskit.Config{Long: *duration, TTL: ttl, Stall: stall, Release: release}
}

// TestChaosEtcd: a 3-member cluster, four clients each with an etcd client
// of every member through proxies of its own, and a Locker over it.
func TestChaosEtcd(t *testing.T) {
	w := chaoskit.New(t, chaoskit.PGRegister(t, "etcd"), config())
	etcdSetup(t, w)
	w.Run(25 * time.Second)
	w.Check("etcd")
}

// TestChaosEtcdMultiKey runs the multi-key workload (transfers under
// LockAll of both accounts, one transaction fenced on both) on the etcd
// setup: LockAll takes the keys one at a time in their order, the
// backend's path without a Batcher.
func TestChaosEtcdMultiKey(t *testing.T) {
	w := chaoskit.NewTransfers(t, chaoskit.PGLedger(t, "multi_etcd"), config())
	etcdSetup(t, w)
	w.Run(15 * time.Second)
	w.Check("multikey-etcd")
}

// etcdSetup gives w its clients' Lockers over a 3-member cluster, each
// client with an etcd client of every member through proxies of its own,
// and the faults of that setup.
func etcdSetup(t *testing.T, w *chaoskit.World) {
	c := etcdtest.StartCluster(t, 3)
	proxies := make([][]*testutil.TCPProxy, chaoskit.Clients)
	for i := range chaoskit.Clients {
		cli, ps := c.ProxiedClient(t)
		proxies[i] = ps
		b, err := etcddriver.New(cli)
		require.NoError(t, err)
		l, err := mutex.New(b)
		require.NoError(t, err)
		w.Lockers = append(w.Lockers, l)
		t.Cleanup(func() { _ = l.Close() }) // and b's: the Locker owns it
	}
	w.Faults = []chaoskit.Fault{
		leaderKill(t, c),
		{Name: "member paused", Apply: func(rng *rand.Rand) func() {
			m := c.Members[rng.IntN(len(c.Members))]
			m.Pause()
			return m.Resume
		}},
		{Name: "client cut off (its connections black-holed)", Apply: func(rng *rand.Rand) func() {
			ps := proxies[rng.IntN(chaoskit.Clients)]
			for _, p := range ps {
				p.BlackHole()
			}
			return func() {
				for _, p := range ps {
					p.Heal()
				}
			}
		}},
		w.StallFault(),
	}
}

// leaderKill kills the leader as a crash would, and its heal restarts it on
// its data (a majority runs meanwhile, so it rejoins).
func leaderKill(t *testing.T, c *etcdtest.Cluster) chaoskit.Fault {
	return chaoskit.Fault{Name: "leader killed, restarted", Apply: func(*rand.Rand) func() {
		m, err := c.WaitLeader()
		if err != nil {
			t.Errorf("leader kill: %v", err)
			return func() {}
		}
		m.Kill()
		return func() {
			if err := c.Restart(m); err != nil {
				t.Errorf("restart %s: %v", m.Name, err)
			}
		}
	}}
}
