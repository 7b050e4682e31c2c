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

// ProxiedClient returns a client of every member, each reached through a
// fault-injecting TCP proxy of its own (proxies in Members' order), so that
// a test can stall this client's connections (BlackHole on all of them: the
// client is cut off from the cluster) while the cluster and its other
// clients go on. Proxies and client are closed at t's clean-up, the client
// first.
func (c *Cluster) ProxiedClient(t testing.TB) (*clientv3.Client, []*testutil.TCPProxy) {
	t.Helper()
	proxies := make([]*testutil.TCPProxy, len(c.Members))
	endpoints := make([]string, len(c.Members))
	for i, m := range c.Members {
		proxies[i] = testutil.Proxy(t, m.gate.addr)
		endpoints[i] = "http://" + proxies[i].Addr()
	}
	return client(t, endpoints...), proxies
}
