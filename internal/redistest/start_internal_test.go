package redistest

import (
	"context"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
)

// TestStartTellsItsServerFromAnother: when another package's server holds
// the port, start fails (ours cannot bind it) instead of taking the other
// server, which answers pings too, for its own.
func TestStartTellsItsServerFromAnother(t *testing.T) {
	other := StartRedis(t)
	s := &RedisServer{t: t, bin: other.bin, dir: t.TempDir(), port: other.port}
	t.Cleanup(s.stop)
	require.ErrorContains(t, s.start(), "another redis-server answers there")
}

// TestClusterNodeAboveThePortLimit: a cluster node on a port above 55535,
// where redis-server would put its cluster bus past 65535 and refuse to
// start, starts, since StartRedis gives it a bus port of its own.
func TestClusterNodeAboveThePortLimit(t *testing.T) {
	args := []string{"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}
	node := StartRedis(t, WithRedisArgs(args...))
	require.NotZero(t, node.busPort, "StartRedis gave a cluster node no bus port")
	// Ports from 61000 are outside the kernel's ephemeral range: no other
	// package's server is given one while this test runs.
	high := 0
	for p := 61000; p < 65535 && high == 0; p += 7 {
		if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p))); err == nil {
			_ = ln.Close()
			high = p
		}
	}
	require.NotZero(t, high, "no free port from 61000 up")
	s := &RedisServer{t: t, bin: node.bin, dir: t.TempDir(), port: high, busPort: testutil.FreePort(t), args: args}
	t.Cleanup(s.stop)
	require.NoError(t, s.start())
	c := s.Client()
	defer c.Close()
	got, err := c.ConfigGet(context.Background(), "cluster-port").Result()
	require.NoError(t, err)
	require.Equal(t, strconv.Itoa(s.busPort), got["cluster-port"])
}

// TestKillHoldsThePort: a killed server's port refuses connections and is
// no one else's (a bind without SO_REUSEADDR, which the kernel's choice of
// a free port respects as well, fails) until Restart starts it there.
func TestKillHoldsThePort(t *testing.T) {
	srv := StartRedis(t) // no client: no connection lingers on the port
	srv.Kill()
	_, err := net.DialTimeout("tcp", srv.Addr(), 5*time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	fd, _, err := testutil.BindLoopback(srv.port, false)
	if err == nil {
		_ = syscall.Close(fd)
	}
	require.ErrorIs(t, err, syscall.EADDRINUSE, "the killed server's port was free for others")
	srv.Restart()
	c := srv.Client()
	defer c.Close()
	require.NoError(t, c.Ping(context.Background()).Err())
}
