package asynqlock_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
)

// TestLimitPerKey: WithLimit(3), 60 tasks of 2 tenants on 2 servers × 10
// workers. Never more than 3 handlers of one tenant at once, the limit
// reached, every token distinct, and a tenant at its limit retried
// without a failure counted.
func TestLimitPerKey(t *testing.T) {
	_, srv := redistest.Redis(t)
	const limit = 3
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		most     = map[string]int{}
		tokens   = map[int64]bool{}
		done     = map[string]bool{}
		over     atomic.Int64
		dups     atomic.Int64
		locked   atomic.Int64
	)
	handler := func(ctx context.Context, task *asynq.Task) error {
		key, _ := accountKey(task)
		tok, ok := asynqlock.Token(ctx)
		assert.True(t, ok, "the permit's token is in the handler's ctx")
		mu.Lock()
		inFlight[key]++
		most[key] = max(most[key], inFlight[key])
		if inFlight[key] > limit {
			over.Add(1)
		}
		if tokens[tok] {
			dups.Add(1)
		}
		tokens[tok] = true
		mu.Unlock()
		time.Sleep(20 * time.Millisecond) // the work
		mu.Lock()
		inFlight[key]--
		id, _ := asynq.GetTaskID(ctx)
		done[id] = true
		mu.Unlock()
		return ctx.Err()
	}
	countLocked := countErrLocked(&locked)
	server(t, srv, handler, countLocked, asynqlock.WithLimit(limit))
	server(t, srv, handler, countLocked, asynqlock.WithLimit(limit))
	enqueue(t, srv, 60, 2)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 60
	}, 60*time.Second, 20*time.Millisecond, "all 60 tasks processed")
	assert.Zero(t, over.Load(), "more than %d handlers of one tenant at once", limit)
	assert.Zero(t, dups.Load(), "a token given twice")
	mu.Lock()
	for k, n := range most {
		assert.Equal(t, limit, n, "tenant %s never reached its limit", k)
	}
	mu.Unlock()
	assert.Positive(t, locked.Load(), "the tenants were at their limit")

	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	info, err := insp.GetQueueInfo("default")
	require.NoError(t, err)
	assert.Zero(t, info.Failed, "ErrLocked is not a failure")
	assert.Equal(t, 60, info.Processed)
}

// WithLimit is refused when built with WithKeys, out of range, or over a
// Locker without semaphores.
func TestLimitRefusals(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	keys := func(*asynq.Task) ([]string, error) { return []string{"a"}, nil }
	for name, opts := range map[string][]asynqlock.Option{
		"zero":      {asynqlock.WithLimit(0)},
		"too large": {asynqlock.WithLimit(mutex.MaxLimit + 1)},
		"with keys": {asynqlock.WithKeys(keys), asynqlock.WithLimit(2)},
	} {
		_, err := asynqlock.New(l, opts...)
		assert.ErrorIs(t, err, asynqlock.ErrInvalid, name)
	}
	clients, _ := redistest.RedisN(t, 3)
	rl := redistest.Redlock(t, clients)
	_, err := asynqlock.New(rl, asynqlock.WithLimit(2))
	assert.ErrorIs(t, err, asynqlock.ErrInvalid)
	_, err = asynqlock.New(rl)
	assert.NoError(t, err, "one handler per key needs no semaphore")
}
