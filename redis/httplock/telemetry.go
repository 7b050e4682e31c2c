package httplock

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/otelscope"
)

// instrumentation is the scope of every span and instrument: the import
// path (otelscope gives the version).
const instrumentation = "github.com/redfence/redfence/redis/httplock"

const (
	attrMethod = attribute.Key("http.request.method")
	attrPath   = attribute.Key("url.path")
	attrRole   = attribute.Key("redfence.http.role")
	attrKey    = attribute.Key("redfence.key")  // the key's lock, as mutex's spans name it
	attrWait   = attribute.Key("redfence.wait") // seconds
	// attrBypass says why a request bypassed before any flight (method,
	// body, credentials, conditional, override, reload, upgrade), or, on a
	// flight's leader, that it skipped the cross-replica step because Redis
	// is down (redis_down).
	attrBypass = attribute.Key("redfence.http.bypass")
)

// bypassRedisDown is attrBypass's value on a leader that collapsed its local
// flight only: Redis was marked down, or failed on its path.
const bypassRedisDown = "redis_down"

type telemetry struct {
	tracer   trace.Tracer
	origin   metric.Int64Counter
	collapse metric.Int64Counter
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) telemetry {
	tracer, m := otelscope.New(instrumentation, tp, mp)
	t := telemetry{tracer: tracer}
	// Creation fails only on invalid names; the API returns no-op counters then.
	t.origin, _ = m.Int64Counter("redfence.http.origin_calls", metric.WithUnit("{request}"),
		metric.WithDescription("Requests that called the wrapped handler."))
	t.collapse, _ = m.Int64Counter("redfence.http.collapsed", metric.WithUnit("{request}"),
		metric.WithDescription("Requests served a response made for another request."))
	return t
}

func (t telemetry) originCall(ctx context.Context) { t.origin.Add(ctx, 1) }
func (t telemetry) collapsed(ctx context.Context)  { t.collapse.Add(ctx, 1) }

// recordError notes a Redis problem on the request's span: the request goes
// on, without cross-replica protection, rather than failing.
func (t telemetry) recordError(ctx context.Context, err error) {
	trace.SpanFromContext(ctx).RecordError(err)
}

func (t telemetry) end(span trace.Span, role string, wait time.Duration) {
	span.SetAttributes(attrRole.String(role), attrWait.Float64(wait.Seconds()))
	span.End()
}

// timing measures a request's wait: from its arrival to the moment it
// starts serving a response (shared, or its own origin call).
type timing struct {
	start time.Time
	wait  time.Duration
	set   bool
}

type timingKey struct{}

// markWaited records the wait of r the first time it is called; requests
// run in one goroutine each, so no lock is needed.
func markWaited(r *http.Request) {
	if tm, ok := r.Context().Value(timingKey{}).(*timing); ok && !tm.set {
		tm.wait, tm.set = time.Since(tm.start), true
	}
}

func (tm *timing) waited() time.Duration {
	if !tm.set {
		return time.Since(tm.start)
	}
	return tm.wait
}
