package fenced_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced"
)

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
