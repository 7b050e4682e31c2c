package sqlfence

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced/internal/fencetel"
)

// instrumentation is the scope of every span and instrument: the import
// path (otelscope gives the version).
const instrumentation = "github.com/redfence/redfence/fenced/sqlfence"

// newTelemetry is the guard's tracer and check counter, under this
// package's scope.
func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) fencetel.Telemetry {
	return fencetel.New(instrumentation, tp, mp)
}
