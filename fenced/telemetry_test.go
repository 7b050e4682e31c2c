package fenced_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// TestPausedHolderIsFenced is the story fenced exists for: holder A stalls
// past its lease (a GC pause), B takes the lock with a larger token and
// writes, and A's late write is rejected: the data shows only B's.
func TestPausedHolderIsFenced(t *testing.T) {
	pool, g, _, data := setup(t)
	rc, _ := testutil.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	la, lb := testutil.Locker(t, rc), testutil.Locker(t, rc)

	a, err := la.Lock(ctx, "ledger:42", mutex.WithTTL(200*time.Millisecond), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	// A "pauses": it does nothing until its lease has run out.
	<-a.Context().Done()
	require.ErrorIs(t, context.Cause(a.Context()), mutex.ErrLockLost)

	b, err := lb.Lock(ctx, "ledger:42")
	require.NoError(t, err)
	require.Greater(t, b.Token(), a.Token())
	require.NoError(t, g.Do(ctx, "ledger:42", b.Token(), insert(data, "ledger:42", b.Token(), "B")))

	// A wakes up and writes as if it still held the lock.
	err = g.Do(ctx, "ledger:42", a.Token(), insert(data, "ledger:42", a.Token(), "A"))
	var stale *fenced.StaleTokenError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, b.Token(), stale.Highest)
	require.NoError(t, b.Release(ctx))
	assert.ErrorIs(t, a.Release(ctx), mutex.ErrNotHeld)

	assert.Equal(t, []string{"B"}, tags(t, pool, data))
}

func TestTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	_, g, _, data := setup(t, fenced.WithTracerProvider(tp), fenced.WithMeterProvider(mp))
	ctx := context.Background()

	require.NoError(t, g.Do(ctx, "tel", 9, insert(data, "tel", 9, "ok")))
	require.ErrorIs(t, g.Do(ctx, "tel", 4, insert(data, "tel", 4, "stale")), fenced.ErrStaleToken)

	spans := rec.Ended()
	require.Len(t, spans, 2)
	want := []map[attribute.Key]attribute.Value{
		{"redfence.resource": attribute.StringValue("tel"), "redfence.token": attribute.Int64Value(9),
			"redfence.outcome": attribute.StringValue("accepted"), "redfence.highest": attribute.Int64Value(9)},
		{"redfence.resource": attribute.StringValue("tel"), "redfence.token": attribute.Int64Value(4),
			"redfence.outcome": attribute.StringValue("stale"), "redfence.highest": attribute.Int64Value(9)},
	}
	for i, s := range spans {
		assert.Equal(t, "redfence.fenced.Do", s.Name())
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind(), "Do wraps the caller's code")
		assert.Equal(t, "github.com/redfence/redfence/fenced", s.InstrumentationScope().Name)
		assert.NotEmpty(t, s.InstrumentationScope().Version)
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			got[kv.Key] = kv.Value
		}
		assert.Equal(t, want[i], got)
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		assert.NotEmpty(t, sm.Scope.Version)
		for _, m := range sm.Metrics {
			if m.Name != "redfence.fence.checks" {
				continue
			}
			assert.Equal(t, "{check}", m.Unit)
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				v, _ := dp.Attributes.Value("redfence.outcome")
				counts[v.AsString()] += dp.Value
			}
		}
	}
	assert.Equal(t, map[string]int64{"accepted": 1, "stale": 1}, counts)
}
