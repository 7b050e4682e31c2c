package asynqlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
)

// holders counts, for each key, the masters that hold it, each read on
// its own (Inspect's per-node views; a released key stays in Redis with
// its last token, so its existence says nothing).
func holders(t *testing.T, l *mutex.Locker, keys ...string) map[string]int {
	t.Helper()
	a, err := admin.New(l)
	require.NoError(t, err)
	n := map[string]int{}
	for _, k := range keys {
		info, err := a.Inspect(context.Background(), k)
		require.NoError(t, err)
		require.Len(t, info.Nodes, 3)
		n[k] = 0
		for _, node := range info.Nodes {
			require.NoError(t, node.Err)
			if node.Info.State == admin.Held {
				n[k]++
			}
		}
	}
	return n
}

// released asserts that the quorum holds none of keys now (a Redlock
// release returns once a majority freed the key, without the nodes after
// it) and that every master frees them soon after (the rest of the
// release, in the background).
func released(t *testing.T, l *mutex.Locker, keys []string, msg string) {
	t.Helper()
	for k, n := range holders(t, l, keys...) {
		assert.Less(t, n, 2, "%s: %s held by a quorum", msg, k)
	}
	assert.Eventually(t, func() bool {
		for _, n := range holders(t, l, keys...) {
			if n > 0 {
				return false
			}
		}
		return true
	}, 10*time.Second, 5*time.Millisecond, "%s: held on a master", msg)
}

// TestWithKeysOverRedlock: a task naming three keys, over a Redlock Locker
// of three masters, runs its handler with all three held on every master
// (LockAll over Redlock, the generic ordered path), a token per key, and
// leaves none held after; with one key held by another Locker it is
// ErrLocked, the handler does not run, and the two free keys are left
// held on no master (the quorum at once, every master soon after).
func TestWithKeysOverRedlock(t *testing.T) {
	masters, _ := redistest.RedisN(t, 3)
	l := redistest.Redlock(t, masters)
	other := redistest.Redlock(t, masters)
	ctx := context.Background()
	keys := []string{"account:c", "account:a", "account:b"}
	lockKeys := []string{"asynq:account:a", "asynq:account:b", "asynq:account:c"}

	ran := false
	err := processKeys(t, l, keys, func(ctx context.Context, _ *asynq.Task) error {
		ran = true
		assert.Equal(t, map[string]int{"asynq:account:a": 3, "asynq:account:b": 3, "asynq:account:c": 3}, holders(t, other, lockKeys...),
			"every key held on every master while the handler runs")
		seen := map[int64]bool{}
		for _, k := range keys {
			tok, ok := asynqlock.KeyToken(ctx, k)
			assert.True(t, ok, "a token for %s", k)
			assert.Positive(t, tok, "%s's token", k)
			seen[tok] = true
		}
		_, one := asynqlock.Token(ctx)
		assert.False(t, one, "Token is for one-key tasks")
		_, ok := asynqlock.KeyToken(ctx, "account:d")
		assert.False(t, ok, "no token for a key the task did not name")
		return nil
	})
	require.NoError(t, err)
	assert.True(t, ran, "the handler ran")
	released(t, other, lockKeys, "after the task")

	lk, err := other.Lock(ctx, "asynq:account:b")
	require.NoError(t, err)
	defer lk.Release(ctx)
	ran = false
	err = processKeys(t, l, keys, func(context.Context, *asynq.Task) error { ran = true; return nil })
	assert.ErrorIs(t, err, asynqlock.ErrLocked)
	assert.ErrorContains(t, err, "asynq:account:b", "the error names the busy key")
	assert.False(t, asynqlock.IsFailure(err))
	assert.False(t, ran, "the handler ran without all its keys")
	released(t, other, []string{"asynq:account:a", "asynq:account:c"}, "the busy task's free keys")
	assert.Equal(t, map[string]int{"asynq:account:b": 3}, holders(t, other, "asynq:account:b"), "the other Locker's key untouched")
}
