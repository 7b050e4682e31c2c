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
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
)

// TestWorkIsTheTasksChild: a span of work in the handler (a fenced.Do, say)
// is a child of the task's redfence.asynqlock span, live until after the
// work ended, not of mutex's redfence.TryLock, which ended when the lock
// was taken; and both spans name the lock by one key, the prefixed one.
func TestWorkIsTheTasksChild(t *testing.T) {
	c, _ := redistest.Redis(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	l := redistest.Locker(t, c, mutex.WithTracerProvider(tp))
	work := func(ctx context.Context, _ *asynq.Task) error {
		_, span := tp.Tracer("app").Start(ctx, "fenced.Do")
		span.End()
		return nil
	}
	require.NoError(t, process(t, l, "account:99", work, asynqlock.WithTracerProvider(tp)))

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	for _, name := range []string{"fenced.Do", "redfence.asynqlock", "redfence.TryLock"} {
		require.Contains(t, spans, name)
	}
	child, task, try := spans["fenced.Do"], spans["redfence.asynqlock"], spans["redfence.TryLock"]
	assert.Equal(t, task.SpanContext().SpanID(), child.Parent().SpanID(), "the work is the task's child")
	assert.False(t, task.EndTime().Before(child.EndTime()), "the parent ended after the child")
	assert.Equal(t, task.SpanContext().SpanID(), try.Parent().SpanID(), "the lock's acquisition too")
	key := func(s sdktrace.ReadOnlySpan) string {
		for _, kv := range s.Attributes() {
			if kv.Key == "redfence.key" {
				return kv.Value.AsString()
			}
		}
		return ""
	}
	assert.Equal(t, asynqlock.KeyPrefix+"account:99", key(task))
	assert.Equal(t, key(task), key(try), "one key in the adapter's and the Locker's spans")
}

// TestBusyCountsRetryingTasks: three tasks of a key another handler holds
// are retried by asynq again and again; Busy counts each once.
func TestBusyCountsRetryingTasks(t *testing.T) {
	_, srv := redistest.Redis(t)
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	l := redistest.Locker(t, c)
	ctx := context.Background()
	held, err := l.Lock(ctx, asynqlock.KeyPrefix+"account:7")
	require.NoError(t, err)

	var mu sync.Mutex
	tries := map[string]int{} // ErrLocked returns by task id
	var total atomic.Int64
	counter := func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, task *asynq.Task) error {
			err := next.ProcessTask(ctx, task)
			if id, _ := asynq.GetTaskID(ctx); err != nil {
				mu.Lock()
				tries[id]++
				mu.Unlock()
				total.Add(1)
			}
			return err
		})
	}
	server(t, srv, func(context.Context, *asynq.Task) error { return nil }, counter)
	cl := asynq.NewClient(asynq.RedisClientOpt{Addr: srv.Addr()})
	t.Cleanup(func() { _ = cl.Close() })
	for i := range 3 {
		_, err := cl.Enqueue(asynq.NewTask("transfer", []byte(`{"account":"7","seq":`+string(rune('0'+i))+`}`)))
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { // every task found the key busy twice or more
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, k := range tries {
			if k >= 2 {
				n++
			}
		}
		return n == 3
	}, 30*time.Second, 10*time.Millisecond)
	n, err := asynqlock.Busy(ctx, l, "account:7")
	require.NoError(t, err)
	assert.Equal(t, 3, n, "three tasks retrying, after %d busy attempts", total.Load())
	require.NoError(t, held.Release(ctx))
}

// TestBusyBadInput: Busy refuses what it cannot read, before any round trip.
func TestBusyBadInput(t *testing.T) {
	clients, _ := redistest.RedisN(t, 3)
	rl := redistest.Redlock(t, clients)
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	broken, err := redistest.NewLocker(nil) // a Locker whose construction failed is nil
	require.ErrorIs(t, err, mutex.ErrInvalid)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		busy func() (int, error)
	}{
		//lint:ignore SA1012 a nil ctx is the input under test
		{"nil ctx", func() (int, error) { return asynqlock.Busy(nil, l, "k") }},
		{"nil locker", func() (int, error) { return asynqlock.Busy(ctx, nil, "k") }},
		{"locker of a failed construction", func() (int, error) { return asynqlock.Busy(ctx, broken, "k") }},
		{"Redlock locker", func() (int, error) { return asynqlock.Busy(ctx, rl, "k") }},
		{"empty key", func() (int, error) { return asynqlock.Busy(ctx, l, "") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.busy()
			assert.ErrorIs(t, err, asynqlock.ErrInvalid)
		})
	}
	n, err := asynqlock.Busy(ctx, l, "never-busy")
	require.NoError(t, err)
	assert.Zero(t, n)
}
