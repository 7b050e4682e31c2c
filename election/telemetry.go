package election

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/otelscope"
)

// instrumentation is the scope of every span and instrument: the import
// path (otelscope gives the version).
const instrumentation = "github.com/redfence/redfence/election"

// Attribute keys on spans and metrics.
const (
	attrElection = attribute.Key("redfence.election")
	attrTerm     = attribute.Key("redfence.term")
	attrOutcome  = attribute.Key("redfence.outcome")
	attrReason   = attribute.Key("redfence.reason")
)

type telemetry struct {
	tracer        trace.Tracer
	name          attribute.KeyValue
	campaigns     metric.Int64Counter
	campaignDur   metric.Float64Histogram
	terms         metric.Int64Counter
	termEnds      metric.Int64Counter
	leading       metric.Int64UpDownCounter
	leaderlessDur metric.Float64Histogram
	delays        metric.Int64Counter
}

// newTelemetry builds the instruments; creation fails only on invalid
// names, and the API returns no-op instruments then.
func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider, name string) *telemetry {
	tracer, m := otelscope.New(instrumentation, tp, mp)
	t := &telemetry{tracer: tracer, name: attrElection.String(name)}
	t.campaigns, _ = m.Int64Counter("redfence.election.campaigns", metric.WithUnit("{campaign}"),
		metric.WithDescription("Campaigns ended, by redfence.outcome: won, cancelled or failed."))
	t.campaignDur, _ = m.Float64Histogram("redfence.election.campaign.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a Campaign call to its end."))
	t.terms, _ = m.Int64Counter("redfence.election.terms", metric.WithUnit("{term}"),
		metric.WithDescription("Terms this process began: each is a change of leader."))
	t.termEnds, _ = m.Int64Counter("redfence.election.term.ends", metric.WithUnit("{term}"),
		metric.WithDescription("Terms of this process that ended, by redfence.reason: resigned, lost or stopped."))
	t.leading, _ = m.Int64UpDownCounter("redfence.election.leading", metric.WithUnit("{term}"),
		metric.WithDescription("Terms this process leads now (0 or 1 per election)."))
	t.leaderlessDur, _ = m.Float64Histogram("redfence.election.leaderless.duration", metric.WithUnit("s"),
		metric.WithDescription("Time without a leader before a term of this process began: from the previous "+
			"term's resignation, or from the lock's acquisition after a loss (whose end is unknown: a lower bound)."))
	t.delays, _ = m.Int64Counter("redfence.election.lock_delays", metric.WithUnit("{delay}"),
		metric.WithDescription("Lock-delays served before a term after an unclean loss."))
	return t
}

func (t *telemetry) startCampaign(ctx context.Context) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, "redfence.election.Campaign", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(t.name))
}

func (t *telemetry) endCampaign(ctx context.Context, span trace.Span, start time.Time, term *Term, err error) {
	outcome := "won"
	switch {
	case err != nil && ctx.Err() != nil:
		outcome = "cancelled"
	case err != nil:
		outcome = "failed"
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	if term != nil {
		span.SetAttributes(attrTerm.Int64(term.Token()))
	}
	span.SetAttributes(attrOutcome.String(outcome))
	span.End()
	set := metric.WithAttributes(t.name, attrOutcome.String(outcome))
	t.campaigns.Add(context.Background(), 1, set)
	t.campaignDur.Record(context.Background(), time.Since(start).Seconds(), set)
}

func (t *telemetry) termStarted(*Term) {
	t.terms.Add(context.Background(), 1, metric.WithAttributes(t.name))
	t.leading.Add(context.Background(), 1, metric.WithAttributes(t.name))
}

func (t *telemetry) termEnded(_ *Term, cause error) {
	reason := "lost"
	switch {
	case errors.Is(cause, ErrResigned):
		reason = "resigned"
	case errors.Is(cause, ErrStopped):
		reason = "stopped"
	}
	t.termEnds.Add(context.Background(), 1, metric.WithAttributes(t.name, attrReason.String(reason)))
	t.leading.Add(context.Background(), -1, metric.WithAttributes(t.name))
}

func (t *telemetry) leaderless(ctx context.Context, d time.Duration) {
	t.leaderlessDur.Record(ctx, max(d, 0).Seconds(), metric.WithAttributes(t.name))
}

func (t *telemetry) lockDelayed(ctx context.Context) {
	t.delays.Add(ctx, 1, metric.WithAttributes(t.name))
}
