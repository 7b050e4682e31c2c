package asynqlock_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
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

type transferPayload struct {
	From, To string
}

func transferKeys(t *asynq.Task) ([]string, error) {
	var p transferPayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return nil, err
	}
	return []string{"account:" + p.From, "account:" + p.To}, nil
}

// TestTransferTasksHoldBothAccounts: 150 transfers among 6 accounts, each
// direction at random, on 2 servers × 10 workers, each task locking both
// its accounts (WithKeys). Never two handlers on one account at once, each
// handler sees a token per account, all processed once, the contention
// not counted as failures.
func TestTransferTasksHoldBothAccounts(t *testing.T) {
	_, srv := redistest.Redis(t)
	var (
		mu       sync.Mutex
		inFlight = map[string]int{}
		done     = map[string]bool{}
		overlaps atomic.Int64
		locked   atomic.Int64
	)
	handler := func(ctx context.Context, task *asynq.Task) error {
		keys, _ := transferKeys(task)
		_, one := asynqlock.Token(ctx)
		assert.False(t, one, "Token is for one-key tasks")
		mu.Lock()
		for _, k := range keys {
			tok, ok := asynqlock.KeyToken(ctx, k)
			assert.True(t, ok, "a token for %s", k)
			assert.Positive(t, tok)
			if inFlight[k]++; inFlight[k] > 1 {
				overlaps.Add(1)
			}
		}
		mu.Unlock()
		time.Sleep(2 * time.Millisecond) // the work
		mu.Lock()
		for _, k := range keys {
			inFlight[k]--
		}
		id, _ := asynq.GetTaskID(ctx)
		done[id] = true
		mu.Unlock()
		return nil
	}
	countLocked := countErrLocked(&locked)
	server(t, srv, handler, countLocked, asynqlock.WithKeys(transferKeys))
	server(t, srv, handler, countLocked, asynqlock.WithKeys(transferKeys))

	cl := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer cl.Close()
	rng := rand.New(rand.NewPCG(1, 2))
	const tasks = 150
	for range tasks {
		from := rng.IntN(6)
		to := (from + 1 + rng.IntN(5)) % 6
		b, _ := json.Marshal(transferPayload{From: fmt.Sprint(from), To: fmt.Sprint(to)})
		_, err := cl.Enqueue(asynq.NewTask("transfer", b), asynq.MaxRetry(3))
		require.NoError(t, err)
	}

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == tasks
	}, 60*time.Second, 20*time.Millisecond, "all transfers processed")
	assert.Zero(t, overlaps.Load(), "two handlers on one account at once")
	assert.Positive(t, locked.Load(), "the accounts were contended")
	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	info, err := insp.GetQueueInfo("default")
	require.NoError(t, err)
	assert.Zero(t, info.Failed, "ErrLocked is not a failure")
	assert.Equal(t, tasks, info.Processed)
}

// processKeys runs one task through the middleware with keys as its keys.
func processKeys(t *testing.T, l *mutex.Locker, keys []string, next asynq.HandlerFunc, opts ...asynqlock.Option) error {
	t.Helper()
	mw, err := asynqlock.New(l, append([]asynqlock.Option{asynqlock.WithKeys(func(*asynq.Task) ([]string, error) { return keys, nil })}, opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return mw(next).ProcessTask(ctx, asynq.NewTask("transfer", nil))
}

// One busy account of two is ErrLocked, as one busy key is, with or
// without WithWait: the handler does not run, the free account is left
// unheld (checked in Redis, by Inspect: the lock's Redis key is not the
// key's own name), and Busy counts the task under both.
func TestBusyAccountOfTwo(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	other := redistest.Locker(t, c)
	a, err := admin.New(l)
	require.NoError(t, err)
	ctx := context.Background()
	lk, err := other.Lock(ctx, "asynq:account:b")
	require.NoError(t, err)
	defer lk.Release(ctx)
	for _, wait := range []time.Duration{0, 100 * time.Millisecond} {
		called := false
		err := processKeys(t, l, []string{"account:a", "account:b"}, func(context.Context, *asynq.Task) error { called = true; return nil }, asynqlock.WithWait(wait))
		assert.ErrorIs(t, err, asynqlock.ErrLocked, "wait %v", wait)
		assert.ErrorContains(t, err, "asynq:account:b", "wait %v: the error names the busy key", wait)
		assert.False(t, asynqlock.IsFailure(err), "wait %v", wait)
		assert.False(t, called, "wait %v: the handler ran without both keys", wait)
		info, err := a.Inspect(ctx, "asynq:account:a")
		require.NoError(t, err)
		assert.Equal(t, admin.Free, info.State, "wait %v: the free account is left held", wait)
	}
	for _, k := range []string{"account:a", "account:b"} {
		n, err := asynqlock.Busy(ctx, l, k)
		require.NoError(t, err)
		assert.Equal(t, 2, n, "two busy attempts, each a task of its own outside asynq, under %s", k)
	}
}

// Keys WithKeys gives that the lock cannot take fail the task, saying so.
func TestBadKeyLists(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	_, err := asynqlock.New(l, asynqlock.WithKeys(nil))
	assert.ErrorIs(t, err, asynqlock.ErrInvalid)

	many := make([]string, mutex.MaxKeys+1)
	for i := range many {
		many[i] = fmt.Sprint("k", i)
	}
	for _, tc := range []struct {
		name string
		keys []string
		want string
	}{
		{"none", nil, "no keys"},
		{"an empty one", []string{"a", ""}, "empty key"},
		{"too many", many, mutex.ErrInvalid.Error()},
		{"too long", []string{"a", strings.Repeat("k", mutex.MaxKeyLen)}, mutex.ErrInvalid.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := processKeys(t, l, tc.keys, ok)
			assert.ErrorContains(t, err, tc.want)
			assert.ErrorIs(t, err, asynqlock.ErrInvalid, "bad input, as in every package")
			assert.NotErrorIs(t, err, asynqlock.ErrLocked)
			assert.True(t, asynqlock.IsFailure(err))
		})
	}
	// Duplicates count once: a task naming one key twice runs.
	assert.NoError(t, processKeys(t, l, []string{"a", "a", "b"}, ok))
}
