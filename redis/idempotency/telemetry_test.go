package idempotency_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/idempotency"
)

// TestTelemetry: one INTERNAL span per request with its outcome, naming
// the record's lock as mutex's TryLock span does; the counters count
// handler calls and replays.
func TestTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rdb, _ := redistest.Redis(t)
	l := redistest.Locker(t, rdb, mutex.WithTracerProvider(tp))
	h := handlerOf(t, &charge{}, l, idempotency.WithTracerProvider(tp), idempotency.WithMeterProvider(mp))
	send := func(key, body string) {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(body))
		r.Header.Set(scopeHeader, "acme")
		if key != "" {
			r.Header.Set(idempotency.HeaderName, key)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	send(`"k"`, "{}")
	send(`"k"`, "{}")
	send(`"k"`, `{"other":1}`)
	send("", "{}")

	var outcomes []string
	keys := map[string]string{}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "redfence.idempotency.outcome":
				outcomes = append(outcomes, kv.Value.AsString())
			case "redfence.key":
				keys[s.Name()] = kv.Value.AsString()
			}
		}
		if s.Name() == "redfence.idempotency" {
			assert.Equal(t, trace.SpanKindInternal, s.SpanKind())
			assert.NotEmpty(t, s.InstrumentationScope().Version)
		}
	}
	assert.Equal(t, []string{idempotency.OutcomeHandled, idempotency.OutcomeReplayed, idempotency.OutcomeMismatch, idempotency.OutcomeMissingKey}, outcomes)
	assert.True(t, strings.HasPrefix(keys["redfence.idempotency"], idempotency.LockPrefix), keys)
	assert.Equal(t, keys["redfence.idempotency"], keys["redfence.TryLock"])

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			assert.Equal(t, "{request}", m.Unit, m.Name)
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					sums[m.Name] += dp.Value
				}
			}
		}
	}
	assert.Equal(t, map[string]int64{"redfence.idempotency.handler_calls": 1, "redfence.idempotency.replays": 1}, sums)
}
