package fenced

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

const instrumentation = "github.com/redfence/redfence/fenced"

type telemetry struct {
	tracer trace.Tracer
	checks metric.Int64Counter
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) telemetry {
	if isNil(tp) { // the SDK's providers panic when typed nil
		tp = otel.GetTracerProvider()
	}
	if isNil(mp) {
		mp = otel.GetMeterProvider()
	}
	t := telemetry{tracer: tp.Tracer(instrumentation)}
	// Creation fails only on invalid names; the API returns a no-op counter then.
	t.checks, _ = mp.Meter(instrumentation).Int64Counter("redfence.fence.checks",
		metric.WithDescription("Fence checks, by redfence.outcome: accepted or stale."))
	return t
}
