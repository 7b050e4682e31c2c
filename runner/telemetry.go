package runner

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

const instrumentation = "github.com/redfence/redfence/runner"

const (
	attrJob     = attribute.Key("redfence.job")
	attrSlot    = attribute.Key("redfence.slot")
	attrToken   = attribute.Key("redfence.token")
	attrAttempt = attribute.Key("redfence.attempt")
	attrOutcome = attribute.Key("redfence.outcome")
	attrReason  = attribute.Key("redfence.reason")
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
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(instrumentation)
	t := &telemetry{tracer: tp.Tracer(instrumentation)}
	// Creation fails only on invalid names; the API returns no-ops then.
	t.runs, _ = m.Int64Counter("redfence.runner.runs", metric.WithDescription("Runs, by job and outcome."))
	t.skips, _ = m.Int64Counter("redfence.runner.skipped", metric.WithDescription("Slots claimed but not run, by job and reason (overlap, late)."))
	t.overlaps, _ = m.Int64Counter("redfence.runner.overlaps_prevented", metric.WithDescription("Slots whose run would have overlapped a run still in progress."))
	t.losses, _ = m.Int64Counter("redfence.runner.lock_losses", metric.WithDescription("Runs whose job lock was lost while running."))
	t.lagHist, _ = m.Float64Histogram("redfence.runner.lag", metric.WithUnit("s"),
		metric.WithDescription("From the slot's start (server clock) to the run's start."))
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

// startRun opens the span of one attempt.
func (t *telemetry) startRun(ctx context.Context, run Run) (context.Context, func(error)) {
	ctx, span := t.tracer.Start(ctx, "redfence.runner.run", trace.WithAttributes(
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
