package httplock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
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
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	httplock "github.com/redfence/redfence/redis/httplock"
)

func TestTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	var calls atomic.Int64
	servers := replicas(t, 2, slowOrigin(&calls, 100*time.Millisecond),
		httplock.WithTracerProvider(tp), httplock.WithMeterProvider(mp))
	late := testutil.MeasureLateness(t)
	rs := burst(t, servers, 4, http.MethodGet, "/t", nil)
	require.Equal(t, int64(1), calls.Load())
	_ = get(context.Background(), client(t), http.MethodPost, servers[0].URL+"/t", nil)

	var first time.Time // the earliest span's start: the origin call began after it
	for _, s := range rec.Ended() {
		if s.Name() == "redfence.httplock" && (first.IsZero() || s.StartTime().Before(first)) {
			first = s.StartTime()
		}
	}
	got := map[string]int{}
	for _, s := range rec.Ended() {
		if s.Name() != "redfence.httplock" {
			continue
		}
		assert.Equal(t, trace.SpanKindInternal, s.SpanKind(), "it wraps the user's handler")
		assert.NotEmpty(t, s.InstrumentationScope().Version)
		var role string
		var wait float64
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "redfence.http.role":
				role = kv.Value.AsString()
			case "redfence.wait":
				wait = kv.Value.AsFloat64()
			}
		}
		got[role]++
		switch role {
		case httplock.RoleLeader, httplock.RoleBypass:
			assert.Less(t, wait, late.Bound(50*time.Millisecond).Seconds(), "%s: went to the origin at once", role)
		case httplock.RoleShared:
			// Its wait ended with the 100 ms origin call, at or after
			// first + 100 ms, and began soon after its span did.
			least := 100*time.Millisecond - s.StartTime().Sub(first) - late.Bound(time.Millisecond)
			assert.GreaterOrEqual(t, wait, least.Seconds(), "shared: waited for the 100 ms origin")
		}
	}
	assert.Equal(t, map[string]int{httplock.RoleLeader: 1, httplock.RoleShared: len(rs) - 1, httplock.RoleBypass: 1}, got)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	sums := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		assert.NotEmpty(t, sm.Scope.Version)
		for _, m := range sm.Metrics {
			assert.Equal(t, "{request}", m.Unit, m.Name)
			if s, ok := m.Data.(metricdata.Sum[int64]); ok {
				for _, dp := range s.DataPoints {
					sums[m.Name] += dp.Value
				}
			}
		}
	}
	assert.Equal(t, int64(2), sums["redfence.http.origin_calls"], "the leader and the POST")
	assert.Equal(t, int64(len(rs)-1), sums["redfence.http.collapsed"])
}

// TestSpanNamesTheLock: the request's span names the key's lock as mutex's
// span of the TryLock beneath it does, so that the two can be joined.
func TestSpanNamesTheLock(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c, mutex.WithTracerProvider(tp))
	h := handlerOf(t, okHandler, l, httplock.WithTracerProvider(tp))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/k", nil))

	keys := map[string]string{}
	for _, s := range rec.Ended() {
		for _, kv := range s.Attributes() {
			if kv.Key == "redfence.key" {
				keys[s.Name()] = kv.Value.AsString()
			}
		}
	}
	require.Contains(t, keys, "redfence.httplock")
	assert.True(t, strings.HasPrefix(keys["redfence.httplock"], "httplock:"), keys["redfence.httplock"])
	assert.Equal(t, keys["redfence.httplock"], keys["redfence.TryLock"])
}
