package cli

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// inspect shows a read-write lock's writer or readers (owner, lease left,
// token), its waiting writers and last write's token, after the lock of
// the same name; nothing of a name without one.
func TestInspectShowsRWMutexHolds(t *testing.T) {
	c, srv := testutil.Redis(t)
	l := mutex.New(c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "pricer"}))
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rw, err := l.RWMutex("prices", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	inspect := func(key string) string {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"--redis", "redis://" + srv.Addr(), "inspect", key}, noEnv, nil, &stdout, &stderr)
		require.Zero(t, code, "stderr: %s", stderr.String())
		return stdout.String()
	}
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	out := inspect("prices")
	assert.Contains(t, out, "read-write lock: held for writing, 0 writers waiting, last write's token "+fmt.Sprint(w.Token()))
	assert.Regexp(t, `  write +pricer on .* +[0-9.]+s +`+fmt.Sprint(w.Token()), out)

	require.NoError(t, w.Downgrade(ctx))
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	out = inspect("prices")
	assert.Contains(t, out, "read-write lock: 2 readers")
	assert.Regexp(t, `(?s)  read .*  read `, out)
	require.NoError(t, r.Unlock(ctx))
	require.NoError(t, w.Unlock(ctx))
	assert.NotContains(t, inspect("other"), "read-write")
}
