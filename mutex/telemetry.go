package mutex

import (
	"context"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

const instrumentation = "github.com/redfence/redfence/mutex"

// Attribute keys on spans and metrics.
const (
	attrKey       = attribute.Key("redfence.key")
	attrToken     = attribute.Key("redfence.token")
	attrAttempts  = attribute.Key("redfence.attempts")
	attrWait      = attribute.Key("redfence.wait_ms")
	attrReentrant = attribute.Key("redfence.reentrant")
	attrOutcome   = attribute.Key("redfence.outcome")
	attrReason    = attribute.Key("redfence.reason")
)

type telemetry struct {
	tp         trace.TracerProvider
	tracer     trace.Tracer
	acquireDur metric.Float64Histogram
	acquired   metric.Int64Counter
	contention metric.Int64Counter
	losses     metric.Int64Counter
	holdDur    metric.Float64Histogram
	held       metric.Int64UpDownCounter
	byOutcome  map[string]*outcomeOpts // lockOutcomes; read-only once built
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) *telemetry {
	m := mp.Meter(instrumentation)
	t := &telemetry{tp: tp, tracer: tp.Tracer(instrumentation), byOutcome: map[string]*outcomeOpts{}}
	for _, o := range lockOutcomes {
		t.byOutcome[o] = newOutcomeOpts(o)
	}
	// Instrument creation only fails on invalid names; ours are constant and
	// valid, and the API returns usable no-op instruments on error anyway.
	t.acquireDur, _ = m.Float64Histogram("redfence.lock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a Lock or TryLock call to its outcome."))
	t.acquired, _ = m.Int64Counter("redfence.lock.acquisitions",
		metric.WithDescription("Lock and TryLock outcomes, by redfence.outcome."))
	t.contention, _ = m.Int64Counter("redfence.lock.contention",
		metric.WithDescription("Attempts that found the lock held by another owner."))
	t.losses, _ = m.Int64Counter("redfence.lock.losses",
		metric.WithDescription("Locks lost: renewal found them gone or the lease deadline passed."))
	t.holdDur, _ = m.Float64Histogram("redfence.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from acquisition to release or loss."))
	t.held, _ = m.Int64UpDownCounter("redfence.lock.held",
		metric.WithDescription("Locks currently held by this process."))
	return t
}

func (t *telemetry) lost(key string, token int64, reason string, held time.Duration) {
	ctx := context.Background()
	_, span := t.tracer.Start(ctx, "redfence.LockLost", trace.WithAttributes(
		attrKey.String(key), attrToken.Int64(token), attrReason.String(reason)))
	span.SetStatus(codes.Error, "lock lost: "+reason)
	span.End()
	t.losses.Add(ctx, 1, metric.WithAttributes(attrReason.String(reason)))
	t.holdDur.Record(ctx, held.Seconds())
	t.held.Add(ctx, -1)
}

// outcomeOpts are the options that attribute a measurement to an outcome,
// as the slices the variadic Record and Add take: built once, because an
// attribute set costs an allocation and a sort, and a variadic argument
// passed to an interface method an allocation of its slice, each time.
type outcomeOpts struct {
	record []metric.RecordOption
	add    []metric.AddOption
}

func (t *telemetry) outcomeAttrs(outcome string) *outcomeOpts {
	if o, ok := t.byOutcome[outcome]; ok {
		return o
	}
	return newOutcomeOpts(outcome) // not one of lockOutcomes: built each time
}

// lockOutcomes are the outcomes a Lock or TryLock call records.
var lockOutcomes = []string{"acquired", "reentered", "contended", "timeout", "cancelled", "closed", "error", "replica_ack"}

func newOutcomeOpts(outcome string) *outcomeOpts {
	set := metric.WithAttributeSet(attribute.NewSet(attrOutcome.String(outcome)))
	return &outcomeOpts{record: []metric.RecordOption{set}, add: []metric.AddOption{set}}
}

// unsetGlobalTP is the global TracerProvider as it is before a program sets
// one (package initialisation runs before main): otel's delegating default.
// Until an SDK is installed, its spans do not record, yet each costs three
// allocations and a context. A Locker built on it (no WithTracerProvider)
// skips its spans while the global provider is still that default, and
// starts them as soon as one is set (its tracer then delegates to it).
var unsetGlobalTP = otel.GetTracerProvider()

// startSpan starts a span and, only when it records, sets the key and (when
// there is one, above zero) the token. Attributes built up front, or passed
// on as a variadic slice, would cost allocations on every call otherwise.
//
// While no SDK is installed it starts nothing: see unsetGlobalTP.
func (t *telemetry) startSpan(ctx context.Context, name, key string, token int64) (context.Context, trace.Span) {
	if t.tp == unsetGlobalTP && otel.GetTracerProvider() == unsetGlobalTP {
		return ctx, noop.Span{}
	}
	ctx, span := t.tracer.Start(ctx, name)
	if span.IsRecording() {
		span.SetAttributes(attrKey.String(key))
		if token > 0 {
			span.SetAttributes(attrToken.Int64(token))
		}
	}
	return ctx, span
}

func endSpan(span trace.Span, outcome string, err error) {
	if !span.IsRecording() {
		span.End()
		return
	}
	span.SetAttributes(attrOutcome.String(outcome))
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
