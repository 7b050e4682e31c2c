package runner

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
const instrumentation = "github.com/redfence/redfence/runner"

const (
	attrJob     = attribute.Key("redfence.job")
	attrSlot    = attribute.Key("redfence.slot")
	attrToken   = attribute.Key("redfence.token")
	attrAttempt = attribute.Key("redfence.attempt")
	attrOutcome = attribute.Key("redfence.outcome")
	attrReason  = attribute.Key("redfence.reason")
	attrKey     = attribute.Key("redfence.key")
)

type telemetry struct {
	tracer   trace.Tracer
	runs     metric.Int64Counter
	skips    metric.Int64Counter
	overlaps metric.Int64Counter
	losses   metric.Int64Counter
	lagHist  metric.Float64Histogram
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) *telemetry {
	tracer, m := otelscope.New(instrumentation, tp, mp)
	t := &telemetry{tracer: tracer}
	// Creation fails only on invalid names; the API returns no-ops then.
	t.runs, _ = m.Int64Counter("redfence.runner.runs", metric.WithUnit("{run}"),
		metric.WithDescription("Runs, by job and outcome."))
	t.skips, _ = m.Int64Counter("redfence.runner.skipped", metric.WithUnit("{slot}"),
		metric.WithDescription("Slots claimed but not run, by job and reason (overlap, late)."))
	t.overlaps, _ = m.Int64Counter("redfence.runner.overlaps_prevented", metric.WithUnit("{slot}"),
		metric.WithDescription("Slots whose run would have overlapped a run still in progress."))
	t.losses, _ = m.Int64Counter("redfence.runner.lock_losses", metric.WithUnit("{run}"),
		metric.WithDescription("Runs whose job lock was lost while running."))
	// Seconds, with boundaries for a lag of a millisecond to a minute: the
	// SDK's default boundaries (0 to 10000) suit milliseconds.
	t.lagHist, _ = m.Float64Histogram("redfence.runner.lag", metric.WithUnit("s"),
		metric.WithDescription("From the slot's start (server clock) to the run's start."),
		metric.WithExplicitBucketBoundaries(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60))
	return t
}

func (t *telemetry) ran(ctx context.Context, job, outcome string) {
	t.runs.Add(ctx, 1, metric.WithAttributes(attrJob.String(job), attrOutcome.String(outcome)))
}

func (t *telemetry) skipped(ctx context.Context, job, reason string) {
	t.skips.Add(ctx, 1, metric.WithAttributes(attrJob.String(job), attrReason.String(reason)))
}

func (t *telemetry) overlapPrevented(ctx context.Context, job string) {
	t.overlaps.Add(ctx, 1, metric.WithAttributes(attrJob.String(job)))
}

func (t *telemetry) lockLost(ctx context.Context, job string) {
	t.losses.Add(ctx, 1, metric.WithAttributes(attrJob.String(job)))
}

func (t *telemetry) lag(ctx context.Context, job string, d time.Duration) {
	t.lagHist.Record(ctx, max(d, 0).Seconds(), metric.WithAttributes(attrJob.String(job)))
}

// startRun opens the span of one attempt: INTERNAL, since it wraps the job,
// the caller's code.
func (t *telemetry) startRun(ctx context.Context, run Run) (context.Context, func(error)) {
	ctx, span := t.tracer.Start(ctx, "redfence.runner.run", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attrJob.String(run.Name), attrSlot.String(run.Slot.UTC().Format(time.RFC3339Nano)),
		attrToken.Int64(run.Token), attrAttempt.Int(run.Attempt)))
	return ctx, func(err error) {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
			span.SetAttributes(attrOutcome.String("error"))
		} else {
			span.SetAttributes(attrOutcome.String("ok"))
		}
		span.End()
	}
}

// slotSpan is the span of one claimed slot, from the claim to the lock's
// release: the span of holding the job's lock for it.
type slotSpan struct{ trace.Span }

// startSlot opens a slot's span: INTERNAL, since it wraps the job. key is
// the job's lock, as mutex's spans name it.
func (t *telemetry) startSlot(ctx context.Context, job, key string, slot time.Time) (context.Context, slotSpan) {
	ctx, span := t.tracer.Start(ctx, "redfence.runner.slot", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attrJob.String(job), attrSlot.String(slot.UTC().Format(time.RFC3339Nano)), attrKey.String(key)))
	return ctx, slotSpan{span}
}

func (s slotSpan) token(tok int64) { s.SetAttributes(attrToken.Int64(tok)) }

// end closes the span with the slot's outcome: a run's (ok, error, panic,
// lock_lost), or overlap when the lock was held, error when it could not
// be taken.
func (s slotSpan) end(outcome string) {
	s.SetAttributes(attrOutcome.String(outcome))
	if outcome != "ok" && outcome != "overlap" {
		s.SetStatus(codes.Error, outcome)
	}
	s.End()
}
