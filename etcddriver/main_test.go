package etcddriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
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

// testPrefix is the prefix of the tests' Drivers: a test that reads etcd
// itself finds lock "k" at "t/k".
const testPrefix = "t/"

// driver is a Driver over a client of its own, closed at t's clean-up.
func driver(t *testing.T, c *etcdtest.Cluster, opts ...etcddriver.Option) (*etcddriver.Driver, *clientv3.Client) {
	t.Helper()
	cli := c.Client(t)
	return driverOn(t, cli, opts...), cli
}

// driverOn is a Driver over cli, its keys under testPrefix unless opts
// say otherwise, closed at t's clean-up.
func driverOn(t *testing.T, cli etcddriver.Client, opts ...etcddriver.Option) *etcddriver.Driver {
	t.Helper()
	b, err := etcddriver.New(cli, append([]etcddriver.Option{etcddriver.WithPrefix(testPrefix)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	return b
}

// locker is a Locker over a Driver of its own; both closed at clean-up.
func locker(t *testing.T, c *etcdtest.Cluster, opts ...etcddriver.Option) (*mutex.Locker, *etcddriver.Driver, *clientv3.Client) {
	t.Helper()
	b, cli := driver(t, c, opts...)
	return lockerOn(t, b), b, cli
}

// lockerOn is a Locker over b (or a wrapper of it), closed at clean-up
// (which closes b: the Locker owns it).
func lockerOn(t *testing.T, b backendAll, opts ...mutex.Option) *mutex.Locker {
	t.Helper()
	l, err := mutex.New(b, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// operator is the operator API over l.
func operator(t *testing.T, l *mutex.Locker) *admin.Admin {
	t.Helper()
	a, err := admin.New(l)
	require.NoError(t, err)
	return a
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
