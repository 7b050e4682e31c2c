package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	etcdlock "github.com/redfence/redfence/etcd"
	"github.com/redfence/redfence/etcd/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// goleak needs no exceptions: an embedded member's Close and a client's
// Close stop every goroutine they started.
func TestMain(m *testing.M) { testutil.Main(m) }

// server is one embedded member per test: tests share no keys or revisions.
func server(t *testing.T) *etcdtest.Server { return etcdtest.Start(t) }

// driver is a Backend over a client of its own, closed at t's clean-up.
func driver(t *testing.T, s *etcdtest.Server, opts ...etcdlock.Option) (*etcdlock.Backend, *clientv3.Client) {
	t.Helper()
	cli := s.Client(t)
	b := etcdlock.New(cli, opts...)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	return b, cli
}

// locker is a Locker over a Backend of its own; both closed at clean-up.
func locker(t *testing.T, s *etcdtest.Server, opts ...etcdlock.Option) (*mutex.Locker, *etcdlock.Backend, *clientv3.Client) {
	t.Helper()
	b, cli := driver(t, s, opts...)
	l := mutex.NewWithBackend(b, mutex.WithPrefix("t/"))
	require.NoError(t, l.Err())
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l, b, cli
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
