// Package etcdtest starts embedded etcd clusters (go.etcd.io/etcd/server/v3/embed)
// on free loopback ports in a test's temporary directory, for the tests and
// examples of package etcddriver: one member, or three, whose leader and
// members a test can find, kill, pause and restart, and clients that reach them
// directly or through a proxy that can stall. Nothing has to be installed.
package etcdtest

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// readyWithin bounds a cluster's start (its members ready, with a leader);
// a loaded 2-vCPU machine starts one in about a second.
const readyWithin = 30 * time.Second

// Cluster is a running etcd cluster of one or more members.
type Cluster struct {
	Members []*Member
}

// Start runs a single-member cluster in t's temporary directory and stops it
// at t's clean-up.
func Start(t testing.TB) *Cluster { return StartCluster(t, 1) }

// StartIn runs a single-member cluster with its data in dir; the caller stops
// it (Stop). Examples use it: they have no testing.TB.
func StartIn(dir string) (*Cluster, error) { return StartClusterIn(dir, 1) }

// StartCluster runs a cluster of n members in t's temporary directory and
// stops it at t's clean-up.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c, err := StartClusterIn(t.TempDir(), n)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(c.Stop)
	return c
}

// StartClusterIn runs a cluster of n members with their data under dir; the
// caller stops it (Stop). It returns once every member is ready and they
// agree on a leader.
func StartClusterIn(dir string, n int) (*Cluster, error) {
	if n < 1 {
		return nil, fmt.Errorf("etcdtest: %d members", n)
	}
	var last error
	for try := range 5 { // a free port can be taken between the probe and the listen
		c, err := startCluster(fmt.Sprintf("%s/try%d", dir, try), n)
		if err == nil {
			return c, nil
		}
		last = err
	}
	return nil, last
}

func startCluster(dir string, n int) (*Cluster, error) {
	c := &Cluster{Members: make([]*Member, n)}
	peers := make([]string, n)
	for i := range c.Members {
		m, err := newMember(fmt.Sprintf("m%d", i), fmt.Sprintf("%s/m%d", dir, i))
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Members[i] = m
		p := m.peer()
		peers[i] = m.Name + "=" + p.String()
	}
	initial := strings.Join(peers, ",")
	for _, m := range c.Members {
		if err := m.start(initial, true); err != nil {
			c.Stop()
			return nil, err
		}
	}
	deadline := time.Now().Add(readyWithin)
	for _, m := range c.Members {
		if err := m.ready(deadline); err != nil {
			c.Stop()
			return nil, err
		}
	}
	if _, err := c.leader(deadline); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// Stop stops every member still running and waits for their goroutines.
func (c *Cluster) Stop() {
	var dirs []string
	for _, m := range c.Members {
		if m != nil {
			m.Kill()
			m.gate.close()
			m.peerGate.close()
			dirs = append(dirs, m.dir)
		}
	}
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// Endpoints are the members' client URLs, in Members' order.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.Members))
	for i, m := range c.Members {
		out[i] = m.Endpoint()
	}
	return out
}

// Client returns a client of every member, closed at t's clean-up.
func (c *Cluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return client(t, c.Endpoints()...)
}

// NewClient returns a client of every member; the caller closes it.
func (c *Cluster) NewClient() (*clientv3.Client, error) {
	return NewClient(c.Endpoints()...)
}

// reconnect is how soon a client dials a member again after its connection
// failed: gRPC's default backoff starts at 1 s, which would add seconds to
// every test that kills and restarts a member.
var reconnect = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 250 * time.Millisecond},
	MinConnectTimeout: 5 * time.Second,
}

// NewClient returns a client of the given endpoints, quiet (no logger),
// that dials a lost member again within 250 ms.
func NewClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(reconnect)},
		Logger:      zap.NewNop(),
	})
}

func client(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	c, err := NewClient(endpoints...)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// errNoLeader: the running members did not agree on a leader among them in
// time.
var errNoLeader = errors.New("etcdtest: no leader agreed on")
