package etcddriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/etcddriver/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// goleak needs no exceptions: an embedded member's Close and a client's
// Close stop every goroutine they started.
func TestMain(m *testing.M) { testutil.Main(m) }

// server is one embedded member per test: tests share no keys or revisions.
func server(t *testing.T) *etcdtest.Cluster { return etcdtest.Start(t) }

// topologies are what the Locker's behaviour is tested on: one member, and
// three on loopback (requests then go round the members, and a follower
// forwards its writes to the leader).
var topologies = []struct {
	name    string
	members int
}{{"1 member", 1}, {"3 members", 3}}

// onEach runs test on a cluster of its own of each topology, as subtests
// run side by side: most of a test's time is spent waiting out leases.
func onEach(t *testing.T, test func(t *testing.T, c *etcdtest.Cluster)) {
	for _, tp := range topologies {
		t.Run(tp.name, func(t *testing.T) {
			t.Parallel()
			test(t, etcdtest.StartCluster(t, tp.members))
		})
	}
}

// driver is a Backend over a client of its own, closed at t's clean-up.
func driver(t *testing.T, c *etcdtest.Cluster, opts ...etcddriver.Option) (*etcddriver.Backend, *clientv3.Client) {
	t.Helper()
	cli := c.Client(t)
	return backendOn(t, cli, opts...), cli
}

// backendOn is a Backend over cli, closed at t's clean-up.
func backendOn(t *testing.T, cli etcddriver.Client, opts ...etcddriver.Option) *etcddriver.Backend {
	t.Helper()
	b := etcddriver.New(cli, opts...)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	return b
}

// locker is a Locker over a Backend of its own; both closed at clean-up.
func locker(t *testing.T, c *etcdtest.Cluster, opts ...etcddriver.Option) (*mutex.Locker, *etcddriver.Backend, *clientv3.Client) {
	t.Helper()
	b, cli := driver(t, c, opts...)
	return lockerOn(t, b), b, cli
}

// lockerOn is a Locker over b (or a wrapper of it), closed at clean-up.
func lockerOn(t *testing.T, b backendAll) *mutex.Locker {
	t.Helper()
	l := mutex.NewWithBackend(b, mutex.WithPrefix("t/"))
	require.NoError(t, l.Err())
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
