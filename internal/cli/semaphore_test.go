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

// inspect shows a semaphore's limit and holders (owner, lease left, token)
// after the lock of the same name, and nothing of a name without one.
func TestInspectShowsSemaphoreHolders(t *testing.T) {
	c, srv := testutil.Redis(t)
	l := mutex.New(c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "exporter"}))
	t.Cleanup(func() { _ = l.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := l.Semaphore("tenant:7", 3, mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	var tokens []int64
	for range 2 {
		p, err := s.Acquire(ctx)
		require.NoError(t, err)
		tokens = append(tokens, p.Token())
	}
	inspect := func(key string) string {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"--redis", "redis://" + srv.Addr(), "inspect", key}, noEnv, nil, &stdout, &stderr)
		require.Zero(t, code, "stderr: %s", stderr.String())
		return stdout.String()
	}
	out := inspect("tenant:7")
	assert.Contains(t, out, "semaphore: limit 3, 2 permits held")
	for _, tok := range tokens {
		assert.Contains(t, out, fmt.Sprint(tok))
	}
	assert.Contains(t, out, "exporter")
	assert.Regexp(t, `  [0-9.]+s `, out, "the lease left")
	assert.NotContains(t, inspect("tenant:8"), "semaphore")
}
