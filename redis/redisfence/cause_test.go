package redisfence_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// TestErrorsCarryTheCause: a write on a lock's context after the lock was
// lost says so (mutex.ErrLockLost) wherever the ended ctx stopped it;
// errors.Is finds the cause and the ctx's own error.
func TestErrorsCarryTheCause(t *testing.T) {
	c, _ := redistest.Redis(t)
	f := newFence(t, c)
	k := key("balance", "acct:cause")
	for _, tc := range []struct {
		name string
		inFn bool
	}{
		{name: "before Do"},
		{name: "before EXEC", inFn: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			lose := func() { cancel(mutex.ErrLockLost) }
			if !tc.inFn {
				lose()
			}
			err := f.Do(ctx, "acct:cause", 1, nil, func(ctx context.Context, _ *redis.Tx, pipe redis.Pipeliner) error {
				pipe.Set(ctx, k, "x", 0)
				lose() // the pause: the lock is lost before the write is sent
				return nil
			})
			require.Error(t, err)
			assert.ErrorIs(t, err, mutex.ErrLockLost, "the cause: %v", err)
			assert.ErrorIs(t, err, context.Canceled)
			assert.Contains(t, err.Error(), mutex.ErrLockLost.Error())
		})
	}
	n, err := c.Exists(context.Background(), k).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "nothing written")
}
