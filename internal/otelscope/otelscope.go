// Package otelscope gives each package's telemetry its tracer and meter:
// under the package's own instrumentation scope (its import path) and the
// module's one version.
package otelscope

import (
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/typednil"
)

// Version is every scope's version: the module's release.
const Version = "0.1.0"

// New returns the tracer and the meter of scope from tp and mp. A nil
// provider, typed nil included (the SDK's panic when called), is the
// global one.
func New(scope string, tp trace.TracerProvider, mp metric.MeterProvider) (trace.Tracer, metric.Meter) {
	if typednil.Is(tp) {
		tp = otel.GetTracerProvider()
	}
	if typednil.Is(mp) {
		mp = otel.GetMeterProvider()
	}
	return tp.Tracer(scope, trace.WithInstrumentationVersion(Version)),
		mp.Meter(scope, metric.WithInstrumentationVersion(Version))
}
