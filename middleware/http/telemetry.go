package httplock

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

const instrumentation = "github.com/redfence/redfence/middleware/http"

const (
	attrMethod = attribute.Key("http.request.method")
	attrPath   = attribute.Key("url.path")
	attrRole   = attribute.Key("redfence.http.role")
	attrWait   = attribute.Key("redfence.wait_ms")
)

type telemetry struct {
	tracer   trace.Tracer
	origin   metric.Int64Counter
	collapse metric.Int64Counter
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) telemetry {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentation)
	t := telemetry{tracer: tp.Tracer(instrumentation)}
	// Creation fails only on invalid names; the API returns no-op counters then.
	t.origin, _ = m.Int64Counter("redfence.http.origin_calls",
		metric.WithDescription("Requests that called the wrapped handler."))
	t.collapse, _ = m.Int64Counter("redfence.http.collapsed",
		metric.WithDescription("Requests served a response made for another request."))
	return t
}

func (t telemetry) originCall(ctx context.Context) { t.origin.Add(ctx, 1) }
func (t telemetry) collapsed(ctx context.Context)  { t.collapse.Add(ctx, 1) }

// recordError notes a Redis problem on the request's span: the request goes
// on without protection rather than failing.
func (t telemetry) recordError(ctx context.Context, err error) {
	trace.SpanFromContext(ctx).RecordError(err)
}

func (t telemetry) end(span trace.Span, role string, wait time.Duration) {
	span.SetAttributes(attrRole.String(role), attrWait.Float64(float64(wait)/float64(time.Millisecond)))
	span.End()
}
