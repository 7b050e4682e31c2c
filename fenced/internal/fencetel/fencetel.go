// Package fencetel is the telemetry the SQL fences share: a tracer and the
// redfence.fence.checks counter, under each package's own scope.
package fencetel

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/otelscope"
)

// Telemetry is one guard's tracer and check counter.
type Telemetry struct {
	Tracer trace.Tracer
	Checks metric.Int64Counter
}

// New returns the Telemetry of scope (the package's import path) from tp
// and mp; nil providers are the global ones.
func New(scope string, tp trace.TracerProvider, mp metric.MeterProvider) Telemetry {
	tracer, m := otelscope.New(scope, tp, mp)
	t := Telemetry{Tracer: tracer}
	// Creation fails only on invalid names; the API returns a no-op counter then.
	t.Checks, _ = m.Int64Counter("redfence.fence.checks", metric.WithUnit("{check}"),
		metric.WithDescription("Fence checks, by redfence.outcome: accepted or stale."))
	return t
}
