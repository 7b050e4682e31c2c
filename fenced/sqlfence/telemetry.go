package sqlfence

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/typednil"
)

// The instrumentation scope of every span and instrument: the import path,
// and the module's release (kept equal in each package's telemetry.go; make
// lint checks).
const (
	instrumentation = "github.com/redfence/redfence/fenced/sqlfence"
	version         = "0.1.0"
)

type telemetry struct {
	tracer trace.Tracer
	checks metric.Int64Counter
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) telemetry {
	if typednil.Is(tp) { // the SDK's providers panic when typed nil
		tp = otel.GetTracerProvider()
	}
	if typednil.Is(mp) {
		mp = otel.GetMeterProvider()
	}
	t := telemetry{tracer: tp.Tracer(instrumentation, trace.WithInstrumentationVersion(version))}
	// Creation fails only on invalid names; the API returns a no-op counter then.
	m := mp.Meter(instrumentation, metric.WithInstrumentationVersion(version))
	t.checks, _ = m.Int64Counter("redfence.fence.checks", metric.WithUnit("{check}"),
		metric.WithDescription("Fence checks, by redfence.outcome: accepted or stale."))
	return t
}
