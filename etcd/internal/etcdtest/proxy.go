package etcdtest

import (
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/internal/testutil"
)

// ProxiedClient returns a client of m alone that reaches it through a
// fault-injecting TCP proxy (testutil.TCPProxy: gRPC's HTTP/2 is bytes to
// it), so that a test can stall (BlackHole), slow or cut this client's
// connection while the cluster and its other clients go on. Both are closed
// at t's clean-up, the client first.
func (m *Member) ProxiedClient(t testing.TB) (*clientv3.Client, *testutil.TCPProxy) {
	t.Helper()
	p := testutil.Proxy(t, m.gate.addr)
	return client(t, "http://"+p.Addr()), p
}
