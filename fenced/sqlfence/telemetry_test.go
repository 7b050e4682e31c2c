package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced/sqlfence"
)

// TestTelemetry: fenced's span and instrument names, sqlfence's scope.
func TestTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	e := setup(t, stores[2], sqlfence.WithTracerProvider(tp), sqlfence.WithMeterProvider(mp))
	ctx := context.Background()

	require.NoError(t, e.g.Do(ctx, "tel", 9, e.insert("tel", 9, "ok")))
	require.ErrorIs(t, e.g.Do(ctx, "tel", 4, e.insert("tel", 4, "stale")), sqlfence.ErrStaleToken)
	tx, err := e.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.NoError(t, e.g.Check(ctx, tx, "tel", 10))
	require.NoError(t, tx.Rollback())
	require.Error(t, e.g.Do(ctx, "tel", 11, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO no_such_table VALUES (1)`)
		return err
	}))

	spans := rec.Ended()
	require.Len(t, spans, 4)
	want := []struct {
		name  string
		attrs map[attribute.Key]attribute.Value
	}{
		{"redfence.fenced.Do", map[attribute.Key]attribute.Value{"redfence.resource": attribute.StringValue("tel"), "redfence.token": attribute.Int64Value(9),
			"redfence.outcome": attribute.StringValue("accepted"), "redfence.highest": attribute.Int64Value(9)}},
		{"redfence.fenced.Do", map[attribute.Key]attribute.Value{"redfence.resource": attribute.StringValue("tel"), "redfence.token": attribute.Int64Value(4),
			"redfence.outcome": attribute.StringValue("stale"), "redfence.highest": attribute.Int64Value(9)}},
		{"redfence.fenced.Check", map[attribute.Key]attribute.Value{"redfence.resource": attribute.StringValue("tel"), "redfence.token": attribute.Int64Value(10),
			"redfence.outcome": attribute.StringValue("accepted"), "redfence.highest": attribute.Int64Value(10)}},
		{"redfence.fenced.Do", map[attribute.Key]attribute.Value{"redfence.resource": attribute.StringValue("tel"), "redfence.token": attribute.Int64Value(11),
			"redfence.outcome": attribute.StringValue("error"), "redfence.highest": attribute.Int64Value(11)}},
	}
	for i, s := range spans {
		assert.Equal(t, want[i].name, s.Name())
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
		assert.Equal(t, "github.com/redfence/redfence/fenced/sqlfence", s.InstrumentationScope().Name)
		assert.NotEmpty(t, s.InstrumentationScope().Version)
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			got[kv.Key] = kv.Value
		}
		assert.Equal(t, want[i].attrs, got)
	}
	assert.Equal(t, codes.Error, spans[3].Status().Code, "fn's error")
	assert.Equal(t, codes.Unset, spans[1].Status().Code, "a stale token is not an error of the span")

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	counts := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, "github.com/redfence/redfence/fenced/sqlfence", sm.Scope.Name)
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
	assert.Equal(t, map[string]int64{"accepted": 3, "stale": 1}, counts)
}
