package asynqlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
)

// One task of each outcome: an INTERNAL span per task (it wraps the
// handler) with its outcome and wait in seconds, tasks counted by outcome
// and lock waits recorded, all under the package's versioned scope.
func TestTelemetry(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	tel := []asynqlock.Option{asynqlock.WithTracerProvider(tp), asynqlock.WithMeterProvider(mp)}
	ctx := context.Background()

	require.NoError(t, process(t, l, "fine", ok, tel...))
	boom := errors.New("boom")
	require.ErrorIs(t, process(t, l, "fails", func(context.Context, *asynq.Task) error { return boom }, tel...), boom)
	lk, err := l.Lock(ctx, "asynq:busy")
	require.NoError(t, err)
	require.ErrorIs(t, process(t, l, "busy", ok, tel...), asynqlock.ErrLocked)
	require.NoError(t, lk.Release(ctx))
	lose := func(ctx context.Context, _ *asynq.Task) error {
		if err := c.FlushAll(ctx).Err(); err != nil { // the lock's key is gone
			return err
		}
		<-ctx.Done() // until the renewal finds it gone
		return context.Cause(ctx)
	}
	require.ErrorIs(t, process(t, l, "lost", lose, append(tel, asynqlock.WithTTL(300*time.Millisecond))...), mutex.ErrLockLost)

	outcomes := map[string]string{}
	for _, s := range rec.Ended() {
		assert.Equal(t, "redfence.asynqlock", s.Name())
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind(), "the span wraps the handler, the caller's code")
		assert.Equal(t, "github.com/redfence/redfence/redis/asynqlock", s.InstrumentationScope().Name)
		assert.NotEmpty(t, s.InstrumentationScope().Version)
		attrs := map[string]any{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = kv.Value.AsInterface()
		}
		assert.Equal(t, "transfer", attrs["asynq.task.type"])
		assert.IsType(t, float64(0), attrs["redfence.wait"], "the wait, in seconds")
		outcomes[attrs["redfence.key"].(string)], _ = attrs["redfence.outcome"].(string)
		if attrs["redfence.outcome"] == "locked" {
			assert.Equal(t, int64(1), attrs["redfence.asynqlock.busy"], "one task retrying on the key")
		}
	}
	assert.Equal(t, map[string]string{"asynq:fine": "ok", "asynq:fails": "error", "asynq:busy": "locked", "asynq:lost": "lock_lost"}, outcomes)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	units := map[string]string{}
	tasks := map[string]int64{}
	waits := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, "github.com/redfence/redfence/redis/asynqlock", sm.Scope.Name)
		assert.NotEmpty(t, sm.Scope.Version)
		for _, m := range sm.Metrics {
			units[m.Name] = m.Unit
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, dp := range d.DataPoints {
					o, _ := dp.Attributes.Value("redfence.outcome")
					tasks[o.AsString()] += dp.Value
				}
			case metricdata.Histogram[float64]:
				for _, dp := range d.DataPoints {
					o, _ := dp.Attributes.Value("redfence.outcome")
					waits[o.AsString()] += dp.Count
				}
			}
		}
	}
	assert.Equal(t, map[string]string{"redfence.asynqlock.tasks": "{task}", "redfence.asynqlock.wait": "s"}, units)
	assert.Equal(t, map[string]int64{"ok": 1, "error": 1, "locked": 1, "lock_lost": 1}, tasks)
	assert.Equal(t, map[string]uint64{"acquired": 3, "locked": 1}, waits)
}
