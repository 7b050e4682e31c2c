package mutextest

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// TestWorkUnderTheLockIsTheCallersChild: a span started on lk.Context()
// (or on Do's fn ctx) is a child of the span of the ctx given to Lock,
// which is still live, never of redfence.Lock, which ended when the lock
// was acquired.
func TestWorkUnderTheLockIsTheCallersChild(t *testing.T) {
	c, _ := redistest.Redis(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	l := redistest.Locker(t, c, mutex.WithTracerProvider(tp))
	tr := tp.Tracer("test")

	for _, tc := range []struct {
		name string
		hold func(ctx context.Context, work func(ctx context.Context))
	}{
		{"Lock", func(ctx context.Context, work func(ctx context.Context)) {
			lk, err := l.Lock(ctx, "parent:lock")
			require.NoError(t, err)
			work(lk.Context())
			require.NoError(t, lk.Release(ctx))
		}},
		{"Do", func(ctx context.Context, work func(ctx context.Context)) {
			require.NoError(t, l.Do(ctx, "parent:do", func(ctx context.Context, _ *mutex.Lock) error {
				work(ctx)
				return nil
			}))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.Reset()
			ctx, caller := tr.Start(context.Background(), "caller")
			tc.hold(ctx, func(ctx context.Context) {
				_, w := tr.Start(ctx, "work")
				w.End()
			})
			caller.End()
			spans := map[string]sdktrace.ReadOnlySpan{}
			for _, s := range rec.Ended() {
				spans[s.Name()] = s
			}
			require.Contains(t, spans, "work")
			require.Contains(t, spans, "redfence.Lock")
			work, lock := spans["work"], spans["redfence.Lock"]
			assert.Equal(t, caller.SpanContext().SpanID(), work.Parent().SpanID(), "work is the caller's child")
			assert.NotEqual(t, lock.SpanContext().SpanID(), work.Parent().SpanID(), "not the ended Lock span's")
			assert.True(t, lock.EndTime().Before(work.StartTime()) || lock.EndTime().Equal(work.StartTime()),
				"redfence.Lock had ended when the work began")
			assert.False(t, spans["caller"].EndTime().Before(work.EndTime()), "the parent outlives its child")
		})
	}
}
