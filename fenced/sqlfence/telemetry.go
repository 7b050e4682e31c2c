package sqlfence

import (
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/otelscope"
)

// instrumentation is the scope of every span and instrument: the import
// path (otelscope gives the version).
const instrumentation = "github.com/redfence/redfence/fenced/sqlfence"

type telemetry struct {
	tracer trace.Tracer
	checks metric.Int64Counter
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) telemetry {
	tracer, m := otelscope.New(instrumentation, tp, mp)
	t := telemetry{tracer: tracer}
	// Creation fails only on invalid names; the API returns a no-op counter then.
	t.checks, _ = m.Int64Counter("redfence.fence.checks", metric.WithUnit("{check}"),
		metric.WithDescription("Fence checks, by redfence.outcome: accepted or stale."))
	return t
}
