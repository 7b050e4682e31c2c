package runnertest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/runner"
)

// Each run is an INTERNAL span (it wraps the job) with the job, slot, token
// and attempt; runs are counted in {run} and the lag recorded in seconds,
// all under the package's versioned scope.
func TestTelemetry(t *testing.T) {
	_, srv := redistest.Redis(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	ran := make(chan struct{}, 16)
	rp := startReplica(t, srv.Client(), func(r *runner.Runner) {
		require.NoError(t, r.Add("tel", 50*time.Millisecond, func(context.Context, runner.Run) error {
			select {
			case ran <- struct{}{}:
			default: // enough runs seen; never block the job
			}
			return nil
		}))
	}, runner.WithTracerProvider(tp), runner.WithMeterProvider(mp))
	for range 2 {
		select {
		case <-ran:
		case <-time.After(10 * time.Second):
			t.Fatal("the job did not run twice")
		}
	}
	require.NoError(t, rp.stop()) // Run returns once its runs are recorded

	var spans []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == "redfence.runner.run" { // the slots' spans: TestSpansOfASlot
			spans = append(spans, s)
		}
	}
	require.GreaterOrEqual(t, len(spans), 2)
	for _, s := range spans {
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind(), "a run wraps the job, the caller's code")
		assert.Equal(t, "github.com/redfence/redfence/runner", s.InstrumentationScope().Name)
		assert.NotEmpty(t, s.InstrumentationScope().Version)
		attrs := map[string]bool{}
		for _, kv := range s.Attributes() {
			attrs[string(kv.Key)] = true
		}
		for _, k := range []string{"redfence.job", "redfence.slot", "redfence.token", "redfence.attempt", "redfence.outcome"} {
			assert.True(t, attrs[k], "span lacks %s", k)
		}
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	units := map[string]string{}
	var runs int64
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, "github.com/redfence/redfence/runner", sm.Scope.Name)
		assert.NotEmpty(t, sm.Scope.Version)
		for _, m := range sm.Metrics {
			units[m.Name] = m.Unit
			if m.Name == "redfence.runner.runs" {
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					outcome, _ := dp.Attributes.Value("redfence.outcome")
					assert.Equal(t, "ok", outcome.AsString())
					runs += dp.Value
				}
			}
		}
	}
	assert.GreaterOrEqual(t, runs, int64(2))
	assert.Equal(t, "{run}", units["redfence.runner.runs"])
	assert.Equal(t, "s", units["redfence.runner.lag"])
}
