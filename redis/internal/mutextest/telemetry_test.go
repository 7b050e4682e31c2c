package mutextest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// A Locker's spans (Lock, re-entered Lock, contended TryLock, LockLost) carry
// the key, token, outcome, attempts and wait in seconds, under the package's
// instrumentation scope; its metrics count acquisitions, contention, losses
// and held locks, with their units.
func TestTelemetry(t *testing.T) {
	c, _ := redistest.Redis(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	l := newLocker(t, c, mutex.WithTracerProvider(tp), mutex.WithMeterProvider(mp))
	other := newLocker(t, c)
	ctx := context.Background()

	lk, err := l.Lock(ctx, "tel", mutex.WithTTL(300*time.Millisecond))
	require.NoError(t, err)
	inner, err := l.Lock(lk.Context(), "tel")
	require.NoError(t, err)
	require.NoError(t, inner.Release(ctx))
	held, err := other.Lock(ctx, "tel2")
	require.NoError(t, err)
	_, err = l.TryLock(ctx, "tel2")
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	require.NoError(t, held.Release(ctx))
	require.NoError(t, c.FlushAll(ctx).Err())
	<-lk.Context().Done()

	spans := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = append(spans[s.Name()], s)
	}
	require.Len(t, spans["redfence.Lock"], 2)
	attrs := attrMap(spans["redfence.Lock"][0].Attributes())
	assert.Equal(t, "tel", attrs["redfence.key"].AsString())
	assert.Equal(t, lk.Token(), attrs["redfence.token"].AsInt64())
	assert.Equal(t, "acquired", attrs["redfence.outcome"].AsString())
	assert.EqualValues(t, 1, attrs["redfence.attempts"].AsInt64())
	assert.False(t, attrs["redfence.reentrant"].AsBool())
	assert.Contains(t, attrs, "redfence.wait")
	assert.Less(t, attrs["redfence.wait"].AsFloat64(), 5.0, "redfence.wait is in seconds")
	for _, ss := range spans {
		for _, s := range ss {
			assert.Equal(t, trace.SpanKindInternal, s.SpanKind(), s.Name())
			assert.Equal(t, "github.com/redfence/redfence/mutex", s.InstrumentationScope().Name, s.Name())
			assert.NotEmpty(t, s.InstrumentationScope().Version, s.Name())
		}
	}
	assert.True(t, attrMap(spans["redfence.Lock"][1].Attributes())["redfence.reentrant"].AsBool())
	require.Len(t, spans["redfence.TryLock"], 1)
	assert.Equal(t, "contended", attrMap(spans["redfence.TryLock"][0].Attributes())["redfence.outcome"].AsString())
	require.Len(t, spans["redfence.LockLost"], 1)
	assert.Equal(t, lk.Token(), attrMap(spans["redfence.LockLost"][0].Attributes())["redfence.token"].AsInt64())

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	sums := map[string]int64{}
	hist := map[string]uint64{}
	units := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, "github.com/redfence/redfence/mutex", sm.Scope.Name)
		assert.NotEmpty(t, sm.Scope.Version)
		for _, m := range sm.Metrics {
			units[m.Name] = m.Unit
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
	assert.EqualValues(t, 3, sums["redfence.lock.acquisitions"], "acquired, reentered, contended")
	assert.EqualValues(t, 1, sums["redfence.lock.contention"])
	assert.EqualValues(t, 1, sums["redfence.lock.losses"])
	assert.EqualValues(t, 0, sums["redfence.lock.held"], "nothing held at the end")
	assert.EqualValues(t, 3, hist["redfence.lock.acquire.duration"])
	assert.EqualValues(t, 1, hist["redfence.lock.hold.duration"])
	assert.Equal(t, map[string]string{
		"redfence.lock.acquire.duration": "s",
		"redfence.lock.acquisitions":     "{acquisition}",
		"redfence.lock.contention":       "{attempt}",
		"redfence.lock.losses":           "{lock}",
		"redfence.lock.hold.duration":    "s",
		"redfence.lock.held":             "{lock}",
		"redfence.lock.renewals":         "{renewal}",
	}, units)
}

func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// A Locker on the global TracerProvider (no WithTracerProvider) starts no
// spans while nothing is installed (otel's default makes only non-recording
// ones), and records them once a program installs an SDK, even after the
// Locker was built. otel's default delegates to the first provider set, once
// per process, so the test runs in a fresh process of its own (this binary
// again): repeatable under -count, and the package's other tests never see a
// global provider.
func TestSpansOnceAGlobalProviderIsSet(t *testing.T) {
	const env = "REDFENCE_SPANS_CHILD"
	if os.Getenv(env) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpansOnceAGlobalProviderIsSet$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), env+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child process:\n%s", out)
		require.Contains(t, string(out), "--- PASS: TestSpansOnceAGlobalProviderIsSet", "child process:\n%s", out)
		return
	}
	require.True(t, mutexhooks.IsUnsetGlobal(otel.GetTracerProvider()), "the child process starts with otel's default provider")
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	cycle := func(key string) {
		t.Helper()
		lk, err := l.Lock(ctx, key)
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	}
	cycle("before")
	assert.False(t, mutexhooks.StartsSpans(l), "a span started while no provider is installed: three allocations for nothing")

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	otel.SetTracerProvider(tp)
	cycle("after")

	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		var key string
		for _, a := range s.Attributes() {
			if a.Key == "redfence.key" {
				key = a.Value.AsString()
			}
		}
		assert.Equal(t, "after", key, s.Name())
	}
	assert.ElementsMatch(t, []string{"redfence.Lock", "redfence.Release"}, names)
	assert.True(t, mutexhooks.StartsSpans(l), "no span once a provider is installed")
}

// renewalTelemetry is a Locker over c recording spans and metrics, with
// opts, and the renewals it counted by outcome.
func renewalTelemetry(t *testing.T, c *redis.Client, opts ...any) (*mutex.Locker, *tracetest.SpanRecorder, func() map[string]int64) {
	rec := tracetest.NewSpanRecorder()
	reader := sdkmetric.NewManualReader()
	opts = append(opts,
		mutex.WithTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))),
		mutex.WithMeterProvider(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))))
	l := newLocker(t, c, opts...)
	counted := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(context.Background(), &rm))
		out := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				if m.Name != "redfence.lock.renewals" {
					continue
				}
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					o, _ := dp.Attributes.Value("redfence.outcome")
					out[o.AsString()] += dp.Value
				}
			}
		}
		return out
	}
	return l, rec, counted
}

func spansNamed(rec *tracetest.SpanRecorder, names ...string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		for _, n := range names {
			if s.Name() == n {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestRenewalsAreCountedNotSpanned: by default a renewal that succeeds in
// time is counted (redfence.lock.renewals) and is no span, the renewer's
// as well as Extend's; one that fails is a span with its error.
func TestRenewalsAreCountedNotSpanned(t *testing.T) {
	c, _ := redistest.Redis(t)
	l, rec, counted := renewalTelemetry(t, c)
	ctx := context.Background()

	lk, err := l.Lock(ctx, "renewed", mutex.WithTTL(10*time.Second), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	require.NoError(t, lk.Extend(ctx, 10*time.Second))
	require.NoError(t, lk.Extend(ctx, 10*time.Second))
	assert.Equal(t, int64(2), counted()["extended"])
	for _, s := range spansNamed(rec, "redfence.Extend") {
		assert.True(t, attrMap(s.Attributes())["redfence.late"].AsBool(), "only a late renewal is a span")
	}

	// The renewer's renewals: counted, no span unless late.
	auto, err := l.Lock(ctx, "auto", mutex.WithTTL(600*time.Millisecond))
	require.NoError(t, err)
	require.Eventually(t, func() bool { return counted()["extended"] >= 4 }, 20*time.Second, 5*time.Millisecond, "the renewer renewed twice")
	for _, s := range spansNamed(rec, "redfence.Renew") {
		assert.True(t, attrMap(s.Attributes())["redfence.late"].AsBool(), "only a late renewal is a span")
	}
	require.NoError(t, auto.Release(ctx))

	require.NoError(t, c.Del(ctx, "redfence:{renewed}").Err())
	require.ErrorIs(t, lk.Extend(ctx, 10*time.Second), mutex.ErrNotHeld)
	assert.Equal(t, int64(1), counted()["not_held"])
	failed := spansNamed(rec, "redfence.Extend")
	require.NotEmpty(t, failed, "a failed renewal is a span")
	last := failed[len(failed)-1]
	assert.Equal(t, "not_held", attrMap(last.Attributes())["redfence.outcome"].AsString())
	assert.Equal(t, codes.Error, last.Status().Code)
	assert.Equal(t, "renewed", attrMap(last.Attributes())["redfence.key"].AsString())
}

// TestRenewalSpansOption: WithRenewalSpans brings back a span for every
// renewal, each still counted.
func TestRenewalSpansOption(t *testing.T) {
	c, _ := redistest.Redis(t)
	l, rec, counted := renewalTelemetry(t, c, mutex.WithRenewalSpans(true))
	ctx := context.Background()
	lk, err := l.Lock(ctx, "spanned", mutex.WithTTL(10*time.Second), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	require.NoError(t, lk.Extend(ctx, 10*time.Second))
	require.NoError(t, lk.Extend(ctx, 10*time.Second))
	spans := spansNamed(rec, "redfence.Extend")
	require.Len(t, spans, 2)
	assert.Equal(t, "extended", attrMap(spans[0].Attributes())["redfence.outcome"].AsString())
	assert.Equal(t, lk.Token(), attrMap(spans[0].Attributes())["redfence.token"].AsInt64())
	assert.Equal(t, int64(2), counted()["extended"])
}
