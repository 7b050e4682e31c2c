package testutil

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a real Redis Cluster of masters only, each a private
// redis-server with cluster mode enabled.
type Cluster struct {
	Client  *redis.ClusterClient
	Masters []*RedisServer
}

// RedisCluster starts a Redis Cluster with the given number of masters (at
// least 1), assigns all 16384 slots evenly, waits until every node reports
// cluster_state:ok and returns a ClusterClient for it, closed at Cleanup.
func RedisCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 1 {
		t.Fatalf("testutil: RedisCluster needs at least one master, got %d", masters)
	}
	c := &Cluster{Masters: make([]*RedisServer, masters)}
	nodes := make([]*redis.Client, masters)
	for i := range masters {
		c.Masters[i] = StartRedis(t, WithRedisArgs(
			"--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf",
			"--cluster-node-timeout", "5000",
			"--cluster-require-full-coverage", "yes",
		))
		nodes[i] = c.Masters[i].Client()
		defer nodes[i].Close()
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const slots = 16384
	for i, n := range nodes {
		lo, hi := i*slots/masters, (i+1)*slots/masters-1
		if err := n.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			t.Fatalf("testutil: cluster addslotsrange %d-%d on %s: %v", lo, hi, c.Masters[i].Addr(), err)
		}
		// Distinct epochs avoid a collision-resolution round at start.
		if err := n.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			t.Fatalf("testutil: cluster set-config-epoch: %v", err)
		}
	}
	for i := 1; i < masters; i++ {
		// Each node's bus port is its own (see RedisServer.busPort), so MEET names it.
		if err := nodes[i].Do(ctx, "CLUSTER", "MEET", "127.0.0.1", c.Masters[0].Port(), c.Masters[0].busPort).Err(); err != nil {
			t.Fatalf("testutil: cluster meet: %v", err)
		}
	}
	for i, n := range nodes {
		for {
			info, err := n.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(masters)+"\r") {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("testutil: cluster node %s not ok: %v\n%s", c.Masters[i].Addr(), err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
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
			t.Fatalf("testutil: cluster client not ready: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
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
