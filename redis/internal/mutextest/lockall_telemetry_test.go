package mutextest

import (
	"context"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// A LockAll is one span with the number of keys and an event per group
// attempt, its keys taken one at a time are child Lock spans, and its
// metrics count the call once, as a Lock's do.
func TestLockAllTelemetry(t *testing.T) {
	c, _ := redistest.Redis(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	l := newLocker(t, c, mutex.WithTracerProvider(tp), mutex.WithMeterProvider(mp))
	other := newLocker(t, c)
	ctx := context.Background()

	ls, err := l.LockAll(ctx, []string{"t2", "t1"})
	require.NoError(t, err)
	require.NoError(t, ls.Release(ctx))
	held, err := other.Lock(ctx, "t3")
	require.NoError(t, err)
	_, err = l.TryLockAll(ctx, []string{"t3", "t4"})
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	wctx, cancel := context.WithCancel(ctx)
	go func() {
		assert.Eventually(t, func() bool { return mutexhooks.WaitersOf(l, "t3") == 1 }, 30*time.Second, time.Millisecond)
		cancel()
	}()
	_, err = l.LockAll(wctx, []string{"t3", "t5"})
	require.ErrorIs(t, err, context.Canceled)
	require.NoError(t, held.Release(ctx))

	spans := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = append(spans[s.Name()], s)
	}
	require.Len(t, spans["redfence.LockAll"], 2)
	first, waited := spans["redfence.LockAll"][0], spans["redfence.LockAll"][1]
	attrs := attrMap(first.Attributes())
	assert.EqualValues(t, 2, attrs["redfence.keys"].AsInt64())
	assert.Equal(t, "acquired", attrs["redfence.outcome"].AsString())
	require.Len(t, first.Events(), 1)
	assert.Equal(t, "acquired", attrMap(first.Events()[0].Attributes)["redfence.outcome"].AsString())
	require.Len(t, spans["redfence.ReleaseAll"], 1)
	assert.Equal(t, "released", attrMap(spans["redfence.ReleaseAll"][0].Attributes())["redfence.outcome"].AsString())
	require.Len(t, spans["redfence.TryLockAll"], 1)
	assert.Equal(t, "contended", attrMap(spans["redfence.TryLockAll"][0].Attributes())["redfence.outcome"].AsString())
	assert.Equal(t, "timeout", attrMap(waited.Attributes())["redfence.outcome"].AsString())
	assert.Equal(t, "held", attrMap(waited.Events()[0].Attributes)["redfence.outcome"].AsString())
	require.Len(t, spans["redfence.Lock"], 1, "t3, the key waited for, on its own")
	assert.Equal(t, waited.SpanContext().SpanID(), spans["redfence.Lock"][0].Parent().SpanID())
	assert.Len(t, spans["redfence.Release"], 2, "one per key, under ReleaseAll")

	sums, hist := collect(t, reader)
	assert.EqualValues(t, 3, sums["redfence.lock.acquisitions"], "one per call, not per key")
	assert.EqualValues(t, 3, hist["redfence.lock.acquire.duration"])
	assert.EqualValues(t, 0, sums["redfence.lock.held"], "nothing held at the end")
	assert.EqualValues(t, 2, hist["redfence.lock.hold.duration"], "one per key held")
}

// collect reads reader's sums and histogram counts, by instrument.
func collect(t *testing.T, reader *sdkmetric.ManualReader) (sums map[string]int64, hist map[string]uint64) {
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	sums, hist = map[string]int64{}, map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					hist[m.Name] += p.Count
				}
			}
		}
	}
	return sums, hist
}
