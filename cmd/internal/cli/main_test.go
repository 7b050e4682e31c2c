package cli

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// TestBinary builds the redfence command once and drives the binary, as an
// operator does, against real servers. Its subtests share the build; the
// in-process tests of run are the other Test functions.
func TestBinary(t *testing.T) {
	bin := build(t)
	t.Run("LocksAndInspect", func(t *testing.T) { testLocksAndInspect(t, bin) })
	t.Run("LocksAndInspectRedlock", func(t *testing.T) { testLocksAndInspectRedlock(t, bin) })
	t.Run("WatchRendersAndQuitsOnSignal", func(t *testing.T) { testWatch(t, bin) })
	t.Run("ReleaseForce", func(t *testing.T) { testReleaseForce(t, bin) })
	t.Run("ReleaseRefusesWhatItWasNotAskedToEnd", func(t *testing.T) { testReleaseRefuses(t, bin) })
	t.Run("Errors", func(t *testing.T) { testErrors(t, bin) })
	t.Run("RedlockListingNeedsAQuorum", func(t *testing.T) { testRedlockListingNeedsAQuorum(t, bin) })
	t.Run("RefusesClusterNodeAndReplica", func(t *testing.T) { testRefusesClusterNodeAndReplica(t, bin) })
	t.Run("ReleaseAsks", func(t *testing.T) { testReleaseAsks(t, bin) })
	t.Run("Limits", func(t *testing.T) { testLimits(t, bin) })
	t.Run("HungServer", func(t *testing.T) { testHungServer(t, bin) })
	t.Run("BinaryKeys", func(t *testing.T) { testBinaryKeys(t, bin) })
	t.Run("InspectHintsPrefixes", func(t *testing.T) { testInspectHintsPrefixes(t, bin) })
	t.Run("ProbeRefused", func(t *testing.T) { testProbeRefused(t, bin) })
}

// run is the command over Redis, in process.
func run(ctx context.Context, args []string, env func(string) string, stdin io.Reader, stdout, stderr io.Writer) int {
	return Run(ctx, args, env, stdin, stdout, stderr, Redis)
}

// binary is the built command.
type binary string

// build compiles cmd/redfence (this package over Redis) into a directory
// removed after t, with the go command of the toolchain running the tests:
// go test puts its GOROOT/bin first on the PATH of test binaries
// (runtime.GOROOT is deprecated).
func build(t *testing.T) binary {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	goBin, err := exec.LookPath("go")
	require.NoError(t, err, "the go command")
	out := filepath.Join(t.TempDir(), "redfence")
	cmd := exec.CommandContext(ctx, goBin, "build", "-o", out, "github.com/redfence/redfence/cmd/redfence")
	b, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", b)
	return binary(out)
}

// outcome is what one run of the binary did.
type outcome struct {
	stdout, stderr string
	code           int
	took           time.Duration
}

// run runs the binary with args and waits for it, under ctx. Its
// environment is env alone, plus PATH: the tester's REDIS_URL and
// DATABASE_URL stay out of it.
func (b binary) run(t *testing.T, ctx context.Context, env []string, args ...string) outcome {
	t.Helper()
	cmd := b.command(ctx, env, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	o := outcome{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && exit.Exited():
		o.code = exit.ExitCode()
	default:
		t.Fatalf("redfence %q did not finish: %v (ctx: %v)\nstdout:\n%s\nstderr:\n%s", args, err, ctx.Err(), o.stdout, o.stderr)
	}
	return o
}

// ok runs the binary and requires exit status 0 and nothing on stderr.
func (b binary) ok(t *testing.T, ctx context.Context, env []string, args ...string) string {
	t.Helper()
	o := b.run(t, ctx, env, args...)
	require.Equal(t, 0, o.code, "redfence %q failed:\n%s", args, o.stderr)
	require.Empty(t, o.stderr, "redfence %q", args)
	return o.stdout
}

// command is the binary's exec.Cmd, killed when ctx ends; see run for its
// environment.
func (b binary) command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, string(b), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "USER=tester"}, env...)
	cmd.WaitDelay = 5 * time.Second // the pipes close even if a child holds them
	return cmd
}
