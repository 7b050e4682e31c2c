package idempotency

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/otelscope"
)

// instrumentation is the scope of every span and instrument: the import
// path (otelscope gives the version).
const instrumentation = "github.com/redfence/redfence/redis/idempotency"

const (
	attrMethod  = attribute.Key("http.request.method")
	attrPath    = attribute.Key("url.path")
	attrOutcome = attribute.Key("redfence.idempotency.outcome")
	attrKey     = attribute.Key("redfence.key")  // the record's lock, as mutex's spans name it
	attrWait    = attribute.Key("redfence.wait") // seconds in the middleware, handler included
)

type telemetry struct {
	tracer  trace.Tracer
	handler metric.Int64Counter
	replay  metric.Int64Counter
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) telemetry {
	tracer, m := otelscope.New(instrumentation, tp, mp)
	t := telemetry{tracer: tracer}
	// Creation fails only on invalid names; the API returns no-op counters then.
	t.handler, _ = m.Int64Counter("redfence.idempotency.handler_calls", metric.WithUnit("{request}"),
		metric.WithDescription("Requests that called the wrapped handler."))
	t.replay, _ = m.Int64Counter("redfence.idempotency.replays", metric.WithUnit("{request}"),
		metric.WithDescription("Requests answered with a stored response."))
	return t
}

func (t telemetry) handlerCall(ctx context.Context) { t.handler.Add(ctx, 1) }
func (t telemetry) replayed(ctx context.Context)    { t.replay.Add(ctx, 1) }

// recordError notes a Redis problem on the request's span.
func (t telemetry) recordError(ctx context.Context, err error) {
	if err != nil {
		trace.SpanFromContext(ctx).RecordError(err)
	}
}

func (t telemetry) end(span trace.Span, outcome string, d time.Duration) {
	span.SetAttributes(attrOutcome.String(outcome), attrWait.Float64(d.Seconds()))
	span.End()
}
