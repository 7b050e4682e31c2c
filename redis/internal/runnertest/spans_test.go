package runnertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/runner"
)

// TestSpansOfASlot: a run's span, and the work the job traces, are
// children of the slot's span, which is live until after they end, not of
// mutex's redfence.TryLock, which ended when the lock was taken; the
// slot's span and mutex's name the lock by one key.
func TestSpansOfASlot(t *testing.T) {
	_, srv := redistest.Redis(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	l := redistest.Locker(t, c, mutex.WithTracerProvider(tp))
	r := newRunner(t, l, runner.WithTracerProvider(tp))
	ran := make(chan struct{}, 1)
	// An hourly slot that began a second ago: the first claim runs it, and
	// no other slot comes before the test ends.
	begun := time.Duration(time.Now().UnixMilli()%time.Hour.Milliseconds())*time.Millisecond - time.Second
	require.NoError(t, r.Add("spans", time.Hour, func(ctx context.Context, _ runner.Run) error {
		_, span := tp.Tracer("app").Start(ctx, "fenced.Do")
		span.End()
		ran <- struct{}{}
		return nil
	}, runner.WithOffset((begun+time.Hour)%time.Hour)))
	stop := runUntil(t, r)
	select {
	case <-ran:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run")
	}
	stop() // Run returns once the slot is over

	spans := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = s
	}
	for _, name := range []string{"fenced.Do", "redfence.runner.run", "redfence.runner.slot", "redfence.TryLock", "redfence.Release"} {
		require.Contains(t, spans, name)
	}
	work, run, slot, try := spans["fenced.Do"], spans["redfence.runner.run"], spans["redfence.runner.slot"], spans["redfence.TryLock"]
	assert.Equal(t, run.SpanContext().SpanID(), work.Parent().SpanID(), "the job's work is the run's child")
	assert.Equal(t, slot.SpanContext().SpanID(), run.Parent().SpanID(), "the run is the slot's child")
	assert.NotEqual(t, try.SpanContext().SpanID(), run.Parent().SpanID())
	assert.Equal(t, slot.SpanContext().SpanID(), try.Parent().SpanID(), "so is the lock's acquisition")
	assert.Equal(t, slot.SpanContext().SpanID(), spans["redfence.Release"].Parent().SpanID(), "and its release")
	assert.False(t, slot.EndTime().Before(run.EndTime()), "the slot's span ended after the run's")
	assert.Equal(t, trace.SpanKindInternal, slot.SpanKind())
	attr := func(s sdktrace.ReadOnlySpan, k string) any {
		for _, kv := range s.Attributes() {
			if string(kv.Key) == k {
				return kv.Value.AsInterface()
			}
		}
		return nil
	}
	assert.Equal(t, "runner:spans", attr(slot, "redfence.key"))
	assert.Equal(t, attr(slot, "redfence.key"), attr(try, "redfence.key"), "one key in the runner's and the Locker's spans")
	assert.Equal(t, attr(run, "redfence.token"), attr(slot, "redfence.token"))
	assert.Equal(t, "ok", attr(slot, "redfence.outcome"))
}
