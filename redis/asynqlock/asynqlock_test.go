package asynqlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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

type payload struct {
	Account string `json:"account"`
	Seq     int    `json:"seq"`
}

func accountKey(t *asynq.Task) (string, error) {
	var p payload
	if err := json.Unmarshal(t.Payload(), &p); err != nil {
		return "", err
	}
	return "account:" + p.Account, nil
}

// server starts an asynq server whose handler runs behind asynqlock, with
// its own Redis client and Locker, and stops it at the end of the test.
func server(t *testing.T, srv *redistest.RedisServer, h asynq.HandlerFunc, outer asynq.MiddlewareFunc, opts ...asynqlock.Option) {
	t.Helper()
	c := srv.Client()
	l, err := redistest.NewLocker(c)
	require.NoError(t, err)
	mw, err := asynqlock.New(l, append([]asynqlock.Option{asynqlock.WithKey(accountKey)}, opts...)...)
	require.NoError(t, err)
	mux := asynq.NewServeMux()
	if outer != nil {
		mux.Use(outer)
	}
	mux.Use(mw)
	mux.HandleFunc("transfer", h)
	s := asynq.NewServer(asynq.RedisClientOpt{Addr: srv.Addr()}, asynqlock.Config(asynq.Config{
		Concurrency:              10,
		DelayedTaskCheckInterval: 100 * time.Millisecond,
		TaskCheckInterval:        20 * time.Millisecond,
		LogLevel:                 asynq.FatalLevel,
		ShutdownTimeout:          5 * time.Second,
		// Real failures (a panic) come back quickly too, in tests.
		RetryDelayFunc: func(int, error, *asynq.Task) time.Duration { return 50 * time.Millisecond },
	}))
	require.NoError(t, s.Start(mux))
	t.Cleanup(func() {
		s.Shutdown()
		_ = l.Close()
		_ = c.Close()
	})
}

// countErrLocked is middleware, outside asynqlock, counting ErrLocked returns.
func countErrLocked(n *atomic.Int64) asynq.MiddlewareFunc {
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
			err := next.ProcessTask(ctx, t)
			if errors.Is(err, asynqlock.ErrLocked) {
				n.Add(1)
			}
			return err
		})
	}
}

func enqueue(t *testing.T, srv *redistest.RedisServer, n, keys int) {
	t.Helper()
	cl := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer cl.Close()
	for i := range n {
		b, _ := json.Marshal(payload{Account: fmt.Sprint(i % keys), Seq: i})
		_, err := cl.Enqueue(asynq.NewTask("transfer", b), asynq.MaxRetry(3))
		require.NoError(t, err)
	}
}

// TestOneHandlerPerKey: 200 tasks over 10 keys on 2 servers × 10 workers.
// Never two handlers of one key at once, all processed once, tokens growing
// per key, and the contention retries not counted as failures.
func TestOneHandlerPerKey(t *testing.T) {
	_, srv := redistest.Redis(t)
	var (
		mu        sync.Mutex
		inFlight  = map[string]int{}
		lastToken = map[string]int64{}
		done      = map[string]bool{}
		overlaps  atomic.Int64
		decreases atomic.Int64
		locked    atomic.Int64
	)
	handler := func(ctx context.Context, task *asynq.Task) error {
		key, _ := accountKey(task)
		tok, ok := asynqlock.Token(ctx)
		assert.True(t, ok, "the token is in the handler's ctx")
		mu.Lock()
		inFlight[key]++
		if inFlight[key] > 1 {
			overlaps.Add(1)
		}
		if tok <= lastToken[key] {
			decreases.Add(1)
		}
		lastToken[key] = tok
		mu.Unlock()
		time.Sleep(5 * time.Millisecond) // the work
		mu.Lock()
		inFlight[key]--
		id, _ := asynq.GetTaskID(ctx)
		done[id] = true
		mu.Unlock()
		return nil
	}
	countLocked := countErrLocked(&locked)
	server(t, srv, handler, countLocked)
	server(t, srv, handler, countLocked)
	enqueue(t, srv, 200, 10)

	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(done) == 200
	}, 60*time.Second, 20*time.Millisecond, "all 200 tasks processed")
	assert.Zero(t, overlaps.Load(), "two handlers of one key ran at once")
	assert.Zero(t, decreases.Load(), "tokens strictly increase per key")
	assert.Positive(t, locked.Load(), "the keys were contended")

	insp := asynq.NewInspector(asynq.RedisClientOpt{Addr: srv.Addr()})
	defer insp.Close()
	info, err := insp.GetQueueInfo("default")
	require.NoError(t, err)
	assert.Zero(t, info.Failed, "ErrLocked is not a failure")
	assert.Equal(t, 200, info.Processed, "each task counted once, as a success")
	assert.Zero(t, info.Archived)
	t.Logf("%d contention retries for 200 tasks", locked.Load())
}

// TestLongHandlerKeepsLockUntilLost: a handler outliving the TTL keeps its
// lock and a live ctx; when Redis loses the data, its ctx ends with
// ErrLockLost.
func TestLongHandlerKeepsLockUntilLost(t *testing.T) {
	client, srv := redistest.Redis(t)
	alive := make(chan error, 1)
	cause := make(chan error, 1)
	proceed := make(chan struct{})
	handler := func(ctx context.Context, task *asynq.Task) error {
		time.Sleep(3 * time.Second) // the handler's work outlives three TTLs
		alive <- ctx.Err()
		<-proceed
		<-ctx.Done()
		cause <- context.Cause(ctx)
		return ctx.Err()
	}
	// A renewal may come two thirds of a TTL (660 ms) late, which a busy
	// two-core host does not reach.
	server(t, srv, handler, nil, asynqlock.WithTTL(time.Second))
	enqueue(t, srv, 1, 1)
	require.NoError(t, <-alive, "the ctx is alive after three TTLs")
	require.NoError(t, client.FlushAll(context.Background()).Err())
	close(proceed)
	select {
	case err := <-cause:
		assert.ErrorIs(t, err, mutex.ErrLockLost)
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's ctx did not end after the lock was lost")
	}
}

// TestWaitOption: with WithWait, a busy key is waited for inside the handler
// instead of being retried.
func TestWaitOption(t *testing.T) {
	_, srv := redistest.Redis(t)
	var processed, locked atomic.Int64
	handler := func(ctx context.Context, task *asynq.Task) error {
		time.Sleep(20 * time.Millisecond)
		processed.Add(1)
		return nil
	}
	countLocked := countErrLocked(&locked)
	server(t, srv, handler, countLocked, asynqlock.WithWait(10*time.Second))
	enqueue(t, srv, 10, 1)
	require.Eventually(t, func() bool { return processed.Load() == 10 }, 30*time.Second, 10*time.Millisecond)
	assert.Zero(t, locked.Load(), "waiting handlers never return ErrLocked")
}

func TestPanicReleasesLock(t *testing.T) {
	_, srv := redistest.Redis(t)
	var calls atomic.Int64
	ok := make(chan struct{})
	handler := func(ctx context.Context, task *asynq.Task) error {
		if calls.Add(1) == 1 {
			panic("handler bug")
		}
		close(ok)
		return nil
	}
	server(t, srv, handler, nil)
	enqueue(t, srv, 1, 1)
	select {
	case <-ok: // the retry got the key: the panic released the lock
	case <-time.After(30 * time.Second):
		t.Fatal("the retry after a panic never ran")
	}
}

func TestIsFailureAndRetryDelay(t *testing.T) {
	assert.False(t, asynqlock.IsFailure(fmt.Errorf("%w: k", asynqlock.ErrLocked)))
	assert.True(t, asynqlock.IsFailure(errors.New("boom")))
	assert.False(t, asynqlock.IsFailure(nil))
	d := asynqlock.RetryDelayFunc(nil)(3, asynqlock.ErrLocked, nil)
	assert.True(t, d >= 100*time.Millisecond && d < 300*time.Millisecond, "busy keys retry soon: %v", d)
}
