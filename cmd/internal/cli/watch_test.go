package cli

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// watch draws the table with a header, clearing the screen first, and
// ends with status 0 on SIGINT and on SIGTERM.
func testWatch(t *testing.T, bin binary) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lk, err := newLocker(t, c, holderInfo).Lock(ctx, "acct:1", mutex.WithTTL(30*time.Second))
	require.NoError(t, err)
	row := regexp.MustCompile(`^acct:1\s+held\s+` + strconv.FormatInt(lk.Token(), 10) + `\s`)

	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			cmd := bin.command(ctx, nil, "--redis", "redis://"+srv.Addr(), "watch", "--interval", "500ms", "acct:*")
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			t.Cleanup(func() {
				if cmd.ProcessState == nil { // a failed test left it running
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			})

			// Read frames until one has the header and the lock's row.
			lines := make(chan string)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					select {
					case lines <- sc.Text():
					case <-ctx.Done():
						return
					}
				}
			}()
			header, found := false, false
			for !found {
				select {
				case line, open := <-lines:
					require.True(t, open, "watch ended before it drew the lock; stderr:\n%s", stderr.String())
					if strings.HasPrefix(line, clearScreen+"redfence watch: locks matching \"acct:*\"") {
						header = true
					}
					found = header && row.MatchString(line)
				case <-ctx.Done():
					t.Fatalf("no frame with the header and %q: %v", row, ctx.Err())
				}
			}

			require.NoError(t, cmd.Process.Signal(sig))
			for range lines { // drain until the pipe closes
			}
			err = cmd.Wait()
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				t.Fatalf("watch exited with %v after %v; stderr:\n%s", exit, sig, stderr.String())
			}
			require.NoError(t, err, "watch did not end after %v", sig)
			assert.Empty(t, stderr.String())
		})
	}
	require.NoError(t, lk.Release(ctx))
}
