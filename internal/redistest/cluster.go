package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a real Redis Cluster, each node a private redis-server with
// cluster mode enabled: masters, and replicas when asked for.
type Cluster struct {
	Client  *redis.ClusterClient
	Masters []*RedisServer
	// Replicas are each master's replicas, by master (WithReplicas).
	Replicas [][]*RedisServer
}

// ClusterOption adjusts the Cluster RedisCluster starts.
type ClusterOption func(*clusterConfig)

type clusterConfig struct{ replicas int }

// WithReplicas gives every master n replicas, each replicating it before
// RedisCluster returns: for failover tests (Promote).
func WithReplicas(n int) ClusterOption { return func(c *clusterConfig) { c.replicas = n } }

// clusterArgs are every node's: a node timeout long enough that nothing
// fails over on its own while a test pauses a node; tests promote replicas
// themselves (Promote).
// A replica's first sync starts at once: the default waits 5 s for more
// replicas to share a diskless transfer.
var clusterArgs = []string{
	"--cluster-enabled", "yes",
	"--cluster-config-file", "nodes.conf",
	"--cluster-node-timeout", "5000",
	"--cluster-require-full-coverage", "yes",
	"--repl-diskless-sync-delay", "0",
}

// RedisCluster starts a Redis Cluster with the given number of masters (at
// least 1), assigns all 16384 slots evenly, waits until every node reports
// cluster_state:ok and returns a ClusterClient for it, closed at Cleanup.
func RedisCluster(t testing.TB, masters int, opts ...ClusterOption) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("redistest: RedisCluster needs at least one master, got %d", masters)
	}
	var cfg clusterConfig
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	c := &Cluster{Masters: make([]*RedisServer, masters), Replicas: make([][]*RedisServer, masters)}
	nodes := make([]*redis.Client, masters)
	for i := range masters {
		c.Masters[i] = StartRedis(t, WithRedisArgs(clusterArgs...))
		nodes[i] = c.Masters[i].Client()
		defer nodes[i].Close()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const slots = 16384
	for i, n := range nodes {
		lo, hi := i*slots/masters, (i+1)*slots/masters-1
		if err := n.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("redistest: cluster addslotsrange %d-%d on %s: %v", lo, hi, c.Masters[i].Addr(), err)
		}
		// Distinct epochs avoid a collision-resolution round at start.
		if err := n.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatalf("redistest: cluster set-config-epoch: %v", err)
		}
	}
	for i := 1; i < masters; i++ {
		c.meet(ctx, t, nodes[i])
	}
	all := append([]*RedisServer(nil), c.Masters...)
	for i := range masters {
		for range cfg.replicas {
			r := c.startReplica(ctx, t, c.Masters[i], nodes[i])
			c.Replicas[i] = append(c.Replicas[i], r)
			all = append(all, r)
		}
	}
	for _, s := range all {
		waitNode(ctx, t, s, len(all))
	}

	addrs := make([]string, masters)
	for i, m := range c.Masters {
		addrs[i] = m.Addr()
	}
	c.Client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, DialTimeout: time.Second, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Client.Close() })
	// Every node must agree on the slot map before clients use it.
	for {
		err := c.Client.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
		if err == nil && shardsWithSlots(c.Client.ClusterShards(ctx).Val()) == masters {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: cluster client not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

// meet introduces node n to the first master. Each node's bus port is its
// own (see RedisServer.busPort), so MEET names it.
func (c *Cluster) meet(ctx context.Context, t testing.TB, n *redis.Client) {
	t.Helper()
	if err := n.Do(ctx, "CLUSTER", "MEET", "127.0.0.1", c.Masters[0].Port(), c.Masters[0].busPort).Err(); err != nil {
		t.Fatalf("redistest: cluster meet: %v", err)
	}
}

// startReplica starts a node that replicates master (whose client is mc),
// and waits for its replication link.
func (c *Cluster) startReplica(ctx context.Context, t testing.TB, master *RedisServer, mc *redis.Client) *RedisServer {
	t.Helper()
	id, err := mc.Do(ctx, "CLUSTER", "MYID").Text()
	if err != nil {
		t.Fatalf("redistest: cluster myid of %s: %v", master.Addr(), err)
	}
	r := StartRedis(t, WithRedisArgs(clusterArgs...))
	rc := r.Client()
	defer rc.Close()
	c.meet(ctx, t, rc)
	for { // REPLICATE needs the master known first
		err = rc.Do(ctx, "CLUSTER", "REPLICATE", id).Err()
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: cluster replicate %s on %s: %v", master.Addr(), r.Addr(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		info, err := rc.Info(ctx, "replication").Result()
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return r
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: replica %s of %s never linked: %v\n%s", r.Addr(), master.Addr(), err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitNode waits until s reports cluster_state:ok and knows every node.
func waitNode(ctx context.Context, t testing.TB, s *RedisServer, nodes int) {
	t.Helper()
	n := s.Client()
	defer n.Close()
	for {
		info, err := n.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(nodes)+"\r") {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("redistest: cluster node %s not ok: %v\n%s", s.Addr(), err, info)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Promote makes master's first replica a master in its place with CLUSTER
// FAILOVER TAKEOVER, which needs neither the master nor a vote: it works
// while the master is paused, at once, with no wait for the node timeout.
// It returns once every other master names the replica as the owner of the
// slots, and returns the replica. The cluster's clients are told nothing:
// they learn it as clients do.
func (c *Cluster) Promote(t testing.TB, master int) *RedisServer {
	t.Helper()
	if master < 0 || master >= len(c.Masters) || len(c.Replicas[master]) == 0 {
		t.Fatalf("redistest: Promote(%d): no such master with a replica", master)
	}
	r := c.Replicas[master][0]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rc := r.Client()
	defer rc.Close()
	if err := rc.Do(ctx, "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		t.Fatalf("redistest: cluster failover takeover on %s: %v", r.Addr(), err)
	}
	for i, m := range c.Masters {
		if i == master {
			continue
		}
		mc := m.Client()
		err := waitOwner(ctx, mc, r.Port())
		_ = mc.Close()
		if err != nil {
			t.Fatalf("redistest: %s never saw %s promoted: %v", m.Addr(), r.Addr(), err)
		}
	}
	return r
}

// waitOwner waits until the node behind c lists a shard whose master is
// the node on port and serves slots.
func waitOwner(ctx context.Context, c *redis.Client, port int) error {
	for {
		shards, err := c.ClusterShards(ctx).Result()
		for _, s := range shards {
			for _, n := range s.Nodes {
				if n.Role == "master" && n.Port == int64(port) && len(s.Slots) > 0 {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shardsWithSlots counts the shards that serve slots: one per master once the
// slot map has spread.
func shardsWithSlots(shards []redis.ClusterShard) int {
	n := 0
	for _, s := range shards {
		if len(s.Slots) > 0 {
			n++
		}
	}
	return n
}
