package redlockdriver

import (
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisinspect"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

// Driver is Redlock over N ≥ 3 independent Redis masters: a backend.Backend,
// a backend.Watcher and a backend.BulkReleaser. It is safe for concurrent
// use. It owns goroutines (the release subscriber, calls still out to slow
// nodes, clean-ups); Close stops them and waits. It never closes the
// clients, which stay the caller's.
type Driver struct {
	nodes       []redis.UniversalClient
	addrs       []string // by node, for errors; "" where unknown (Sentinel)
	quorum      int
	prefix      string
	keyTTLs     redisproto.KeyTTL
	nodeTimeout time.Duration // 0: derived from the lease
	now         func() time.Time
	rests       []nodeRest          // by node: resting after failing to answer (noderest.go)
	restEpoch   time.Time           // what rests are counted from
	run         *redisrt.Runner     // owns every goroutine the driver starts but the subscriber's
	subs        *redisrt.Subscriber // the release subscription, one connection per node

	// Inspection (backend.Inspector): the quorum's view, pages that say
	// which nodes they skipped, forced release on every node.
	*redisinspect.Inspector

	closeOnce sync.Once
}

var (
	_ backend.Backend      = (*Driver)(nil)
	_ backend.Watcher      = (*Driver)(nil)
	_ backend.BulkReleaser = (*Driver)(nil)
	_ backend.Inspector    = (*Driver)(nil)
)

// New returns a Driver over clients, in that order: node i is clients[i]
// everywhere (QuorumError.Nodes, Addrs). Each must be its own standalone or
// Sentinel master: fewer than 3 clients, a nil one, a Cluster client, or one
// server twice (as the same client or the same address) returns an error
// wrapping mutex.ErrInvalid, as does a bad option, before any server is
// asked.
//
// A master that stopped answering (a call still out at the store timeout,
// or one that could not reach it) rests: acquisitions with the Locker's own
// owner ids count it as a refusal without asking it, for 100 ms after the
// first failure, doubling up to a second, then ask it again; an answer
// within the store timeout ends the rest. A paused or partitioned master
// then costs an acquisition nothing. Acquisitions never rest so many
// masters that fewer than a majority would be asked, and WithOwner
// acquisitions ask every master. A lock taken while masters rest is held
// on fewer of them, so its renewals have less slack.
func New(clients []redis.UniversalClient, opts ...Option) (*Driver, error) {
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	if len(clients) < 3 {
		return nil, invalid("Redlock needs at least 3 independent masters, got %d", len(clients))
	}
	addrs, err := nodeAddrs(clients)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		nodes:       slices.Clone(clients),
		addrs:       addrs,
		quorum:      len(clients)/2 + 1,
		prefix:      cfg.Prefix,
		keyTTLs:     redisproto.NewKeyTTL(cfg.FenceTTL),
		nodeTimeout: cfg.storeTimeout,
		now:         cfg.now,
		rests:       make([]nodeRest, len(clients)),
		run:         redisrt.NewRunner(false), // Go and Afterward only: the fan-out bounds its calls itself
	}
	d.restEpoch = d.now()
	d.subs = d.newSubscriber()
	d.Inspector = redisinspect.New(redisinspect.Config{
		Prefix: cfg.Prefix, Servers: d.nodes, Addrs: d.addrs, Quorum: d.quorum,
		Publish: "PUBLISH", Go: d.run.Go,
	})
	return d, nil
}

// nodeAddrs checks that Redlock's clients are distinct standalone or
// Sentinel clients and returns their addresses ("" for Sentinel). One
// server twice would make one node count as two votes: a quorum of one
// machine. Two names for one address (localhost and 127.0.0.1) are not
// caught.
func nodeAddrs(clients []redis.UniversalClient) ([]string, error) {
	addrs := make([]string, len(clients))
	for i, c := range clients {
		switch v := c.(type) {
		case nil:
			return nil, invalid("Redlock node %d is nil", i)
		case *redis.Client:
			if v == nil {
				return nil, invalid("Redlock node %d is nil", i)
			}
			// go-redis names a Sentinel client's Addr "FailoverClient": no
			// address to compare. (A custom Dialer that reaches several
			// servers under one Addr must give them distinct Addrs.)
			if a := v.Options().Addr; a != "FailoverClient" {
				addrs[i] = a
			}
		case *redis.ClusterClient:
			return nil, invalid("Redlock node %d is a Cluster client: Redlock needs independent masters", i)
		}
		for j := range i {
			if reflect.TypeOf(c).Comparable() && clients[j] == c {
				return nil, invalid("Redlock nodes %d and %d are the same client: each node must be its own master", j, i)
			}
			if addrs[i] != "" && addrs[j] == addrs[i] {
				return nil, invalid("Redlock nodes %d and %d both reach %s: each node must be its own master", j, i, addrs[i])
			}
		}
	}
	return addrs, nil
}

// Addrs returns each node's address, in New's order; "" where unknown (a
// Sentinel client). The slice is a copy.
func (d *Driver) Addrs() []string { return slices.Clone(d.addrs) }

// Quorum returns the grants a lock needs: N/2+1.
func (d *Driver) Quorum() int { return d.quorum }

// Close stops the release subscriber and waits for every goroutine of the
// driver: calls still out to a node (a hung node's end at the client's
// timeout, or at the call's deadline with ContextTimeoutEnabled), clean-ups
// and settlements. It does not close the clients. It returns nil; later
// calls do nothing.
func (d *Driver) Close() error {
	d.closeOnce.Do(func() {
		d.subs.Close()
		d.run.Close()
	})
	return nil
}

// nodeName names node i in errors: its index, and its address when known.
func (d *Driver) nodeName(i int) string {
	if d.addrs[i] == "" {
		return strconv.Itoa(i)
	}
	return strconv.Itoa(i) + " (" + d.addrs[i] + ")"
}

// nodeTimeoutFor is the per-node bound of one call for a lease of ttl.
func (d *Driver) nodeTimeoutFor(ttl time.Duration) time.Duration {
	if d.nodeTimeout > 0 {
		return d.nodeTimeout
	}
	return min(max(ttl/20, 5*time.Millisecond), 500*time.Millisecond)
}

// keyTTL is how long the Redis key lives past its last use (the fencing
// counter's life, never shorter than the lease), in ms.
func (d *Driver) keyTTL(lease time.Duration) string { return d.keyTTLs.For(lease) }

// name is the Redis key of key: under the driver's prefix (WithPrefix).
func (d *Driver) name(key string) string { return redisproto.LockKey(d.prefix, key) }

// checkKey refuses an empty key.
func (d *Driver) checkKey(key string) error {
	if key == "" {
		return invalid("empty key")
	}
	return nil
}

// releaseArgs are the release script's arguments for the holder owner of
// token, acquired for lease (0: unknown). Redlock's nodes are never
// Cluster: the script's default, PUBLISH, is never sent.
func releaseArgs(owner, token string, lease time.Duration) []any {
	return []any{redisproto.ReleaseValue(owner, token, lease), token}
}
