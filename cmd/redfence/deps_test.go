package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The Redis build of the command compiles neither etcd nor grpc: the etcd
// module's cmd/redfence is the one with --etcd.
func TestBuildHasNoEtcd(t *testing.T) {
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command")
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	require.NoError(t, err, "go list: %s", out)
	deps := strings.Fields(string(out))
	assert.Contains(t, deps, "github.com/redfence/redfence/internal/cli")
	for _, d := range deps {
		assert.False(t, strings.HasPrefix(d, "go.etcd.io/") || strings.HasPrefix(d, "google.golang.org/grpc"), "the Redis build compiles %s", d)
	}
}
