package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
)

// Failures come out in words on stderr, with status 1 when the command
// could not do its work and 2 when it was asked wrongly, and within the
// timeout when Redis does not answer.
func testErrors(t *testing.T, bin binary) {
	refused := testutil.RefusedAddr(t)
	silent := testutil.SilentServer(t)
	for _, tc := range []struct {
		name   string
		env    []string
		args   []string
		code   int
		stderr string // the whole of it, but for a trailing "Run 'redfence help...'" line
		within time.Duration
		waited bool // the message ends with the time it waited: "after 1.01s\n", about o.took
	}{
		{name: "unreachable Redis", args: []string{"--redis", "redis://" + refused, "--timeout", "5s", "locks"}, code: 1,
			stderr: "redfence: cannot reach Redis at " + refused + ": connection refused\n", within: 5 * time.Second},
		{name: "REDIS_URL unreachable", env: []string{"REDIS_URL=redis://" + refused}, args: []string{"inspect", "k"}, code: 1,
			stderr: "redfence: cannot reach Redis at " + refused + ": connection refused\n", within: 10 * time.Second},
		{name: "Redis that does not answer", args: []string{"--redis", "redis://" + silent, "--timeout", "1s", "inspect", "k"}, code: 1,
			stderr: "redfence: Redis at " + silent + " did not answer: gave up after ", within: 3 * time.Second, waited: true},
		{name: "release without --force", args: []string{"--redis", "redis://" + refused, "release", "k", "--reason", "r"}, code: 2,
			stderr: "redfence: " + refusal + ".\n"},
		{name: "unknown command", args: []string{"frobnicate"}, code: 2,
			stderr: "redfence: unknown command \"frobnicate\": the commands are locks, inspect, watch, release, elections, fences and help (help json: the JSON schema)\n"},
		{name: "no command", args: nil, code: 2, stderr: "redfence: no command given\n"},
		{name: "unknown flag", args: []string{"locks", "--jsn"}, code: 2, stderr: "redfence: flag provided but not defined: -jsn\n"},
		{name: "inspect without a key", args: []string{"inspect"}, code: 2, stderr: "redfence: no key given: KEY, or --key-hex HEX\n"},
		{name: "inspect with two keys", args: []string{"inspect", "k", "--key-hex", "6b"}, code: 2, stderr: "redfence: give KEY or --key-hex, not both\n"},
		{name: "watch too often", args: []string{"watch", "--interval", "1ms"}, code: 2,
			stderr: "redfence: --interval must be at least 500ms, got 1ms: each redraw reads every lock it shows\n"},
		{name: "fences without DATABASE_URL", args: []string{"fences"}, code: 1,
			stderr: "redfence: DATABASE_URL is not set: fences reads the fence table of a PostgreSQL database\n"},
		{name: "release --fence without DATABASE_URL", args: []string{"release", "k", "--force", "--reason", "r", "--fence", "acct:1"}, code: 1,
			stderr: "redfence: DATABASE_URL is not set: --fence raises a fence in a PostgreSQL database\n"},
		{name: "two Redis URLs", args: []string{"--redis", "redis://" + refused, "--redis", "redis://" + refused, "locks"}, code: 2,
			stderr: "redfence: two --redis URLs: give one (a server, Sentinel or Cluster) or three or more independent masters for Redlock, whose majority needs at least three\n"},
		{name: "a URL that is not Redis", args: []string{"--redis", "http://u:secret@" + refused, "locks"}, code: 2,
			stderr: "redfence: --redis http://u:xxxxx@" + refused + ": the scheme must be redis:// or rediss://\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			late := testutil.MeasureLateness(t)
			o := bin.run(t, ctx, tc.env, tc.args...)
			assert.Equal(t, tc.code, o.code, "stderr: %s", o.stderr)
			stderr, _, _ := strings.Cut(o.stderr, "Run 'redfence help")
			if tc.waited {
				// The time it says it waited is the time it took, not a
				// bound it was given.
				waited, ok := strings.CutPrefix(stderr, tc.stderr)
				require.True(t, ok, "%q does not start with %q", stderr, tc.stderr)
				d, err := time.ParseDuration(strings.TrimSuffix(waited, "\n"))
				require.NoError(t, err, "%q", waited)
				assert.LessOrEqual(t, d, o.took)
				assert.Greater(t, d, o.took-late.Bound(200*time.Millisecond), "it took %v", o.took)
			} else {
				assert.Equal(t, tc.stderr, stderr)
			}
			assert.NotContains(t, o.stderr, "secret")
			assert.Empty(t, o.stdout)
			if tc.within > 0 {
				assert.Less(t, o.took, late.Bound(tc.within))
			}
		})
	}
}
