package asynqlock

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/otelscope"
)

// instrumentation is the scope of every span and instrument: the import
// path (otelscope gives the version).
const instrumentation = "github.com/redfence/redfence/redis/asynqlock"

// Attribute keys on spans and metrics.
const (
	attrTaskType  = attribute.Key("asynq.task.type")
	attrKey       = attribute.Key("redfence.key")
	attrToken     = attribute.Key("redfence.token")
	attrWait      = attribute.Key("redfence.wait") // seconds
	attrOutcome   = attribute.Key("redfence.outcome")
	attrBusy      = attribute.Key("redfence.asynqlock.busy")   // tasks retrying on the key (Busy)
	attrKeys      = attribute.Key("redfence.keys")             // how many, for several keys (WithKeys)
	attrKeyList   = attribute.Key("redfence.asynqlock.keys")   // the keys, for several
	attrTokenList = attribute.Key("redfence.asynqlock.tokens") // their tokens, in the same order
)

type telemetry struct {
	tracer trace.Tracer
	tasks  metric.Int64Counter
	wait   metric.Float64Histogram
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) telemetry {
	tracer, m := otelscope.New(instrumentation, tp, mp)
	t := telemetry{tracer: tracer}
	// Creation fails only on invalid names; the API returns no-ops then.
	t.tasks, _ = m.Int64Counter("redfence.asynqlock.tasks", metric.WithUnit("{task}"),
		metric.WithDescription("Tasks through the middleware, by asynq.task.type and redfence.outcome (ok, locked, lock_lost, error)."))
	// Seconds, with boundaries from a round trip to WithWait's bounds: the
	// SDK's default boundaries (0 to 10000) suit milliseconds.
	t.wait, _ = m.Float64Histogram("redfence.asynqlock.wait", metric.WithUnit("s"),
		metric.WithDescription("Time a task took to get its lock or give up, by asynq.task.type and redfence.outcome (acquired, locked, error)."),
		metric.WithExplicitBucketBoundaries(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	return t
}

// start opens a task's span: INTERNAL, since it wraps the handler, the
// caller's code (asynq's own instrumentation, if any, owns the task's
// CONSUMER span).
func (t telemetry) start(ctx context.Context, taskType string) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, "redfence.asynqlock", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrTaskType.String(taskType)))
}

// lockWait records how long getting the lock took and how it went:
// acquired, locked or error.
func (t telemetry) lockWait(ctx context.Context, span trace.Span, taskType, outcome string, wait time.Duration) {
	span.SetAttributes(attrWait.Float64(wait.Seconds()))
	t.wait.Record(ctx, wait.Seconds(), metric.WithAttributes(attrTaskType.String(taskType), attrOutcome.String(outcome)))
}

// busy records on a busy task's span how many tasks are retrying on its
// key (Busy), or why that is unknown.
func (t telemetry) busy(span trace.Span, n int, err error) {
	switch {
	case err != nil:
		span.RecordError(err)
	case n >= 0:
		span.SetAttributes(attrBusy.Int(n))
	}
}

// end closes the task's span and counts the task. err is not recorded on a
// busy key, which asynq retries without counting a failure.
func (t telemetry) end(ctx context.Context, span trace.Span, taskType, outcome string, err error) {
	span.SetAttributes(attrOutcome.String(outcome))
	if err != nil && outcome != "locked" {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	t.tasks.Add(ctx, 1, metric.WithAttributes(attrTaskType.String(taskType), attrOutcome.String(outcome)))
}
