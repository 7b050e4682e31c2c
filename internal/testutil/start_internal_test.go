package testutil

import (
	"testing"

	"github.com/stretchr/testify/require"
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
