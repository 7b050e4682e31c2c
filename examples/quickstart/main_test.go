package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestRunTakesAndReleasesTheLock runs the README's example against a real
// redis-server: it holds the lock, and leaves it free.
func TestRunTakesAndReleasesTheLock(t *testing.T) {
	c, srv := redistest.Redis(t)
	require.NoError(t, run(context.Background(), "redis://"+srv.Addr()))
	// The key outlives the lock (it keeps the fencing counter): the lock is
	// free when another Locker takes it at once.
	lk, err := redistest.Locker(t, c).TryLock(context.Background(), "invoice:42")
	require.NoError(t, err, "the lock is still held after run returned")
	assert.Positive(t, lk.Token())
}

// TestReadmeShowsThisProgram: the README's example is this file, word for
// word, so that it compiles and runs as shown.
func TestReadmeShowsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	src, err := os.ReadFile("main.go")
	require.NoError(t, err)
	_, body, ok := strings.Cut(string(src), "package main\n")
	require.True(t, ok)
	assert.Contains(t, string(readme), "```go\npackage main\n"+body+"```", "README.md's example differs from examples/quickstart/main.go")
}
