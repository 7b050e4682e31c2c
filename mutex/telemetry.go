package mutex

import (
	"context"
	"errors"
	"net"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redfence/redfence/internal/otelscope"
)

// instrumentation is the scope of every span and instrument: the import
// path (otelscope gives the version).
const instrumentation = "github.com/redfence/redfence/mutex"

// Attribute keys on spans and metrics.
const (
	attrKey       = attribute.Key("redfence.key")
	attrKeys      = attribute.Key("redfence.keys") // how many, on a call over several keys
	attrToken     = attribute.Key("redfence.token")
	attrAttempts  = attribute.Key("redfence.attempts")
	attrWait      = attribute.Key("redfence.wait") // seconds
	attrReentrant = attribute.Key("redfence.reentrant")
	attrOutcome   = attribute.Key("redfence.outcome")
	attrReason    = attribute.Key("redfence.reason")
	attrErrorType = attribute.Key("error.type")
	attrLate      = attribute.Key("redfence.late") // a renewal whose reply took over a tenth of the lease
)

type telemetry struct {
	global      bool // spans come from otel's global provider
	tracer      trace.Tracer
	spanOpts    []trace.SpanStartOption // built once: a variadic slice per call would allocate
	acquireDur  metric.Float64Histogram
	acquired    metric.Int64Counter
	contention  metric.Int64Counter
	losses      metric.Int64Counter
	holdDur     metric.Float64Histogram
	held        metric.Int64UpDownCounter
	attemptErrs metric.Int64Counter
	forcedRels  metric.Int64Counter
	renewals    metric.Int64Counter
	byOutcome   map[string]*outcomeOpts // lockOutcomes and renewOutcomes; read-only once built

	renewalSpans bool // WithRenewalSpans: a span for every renewal, not only a failed or late one
}

func newTelemetry(tp trace.TracerProvider, mp metric.MeterProvider) *telemetry {
	m := mp.Meter(instrumentation, metric.WithInstrumentationVersion(otelscope.Version))
	t := &telemetry{
		global:    isUnsetGlobal(tp),
		tracer:    tp.Tracer(instrumentation, trace.WithInstrumentationVersion(otelscope.Version)),
		spanOpts:  []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)},
		byOutcome: map[string]*outcomeOpts{},
	}
	for _, o := range slices.Concat(lockOutcomes, renewOutcomes) {
		t.byOutcome[o] = newOutcomeOpts(o)
	}
	// Instrument creation only fails on invalid names; ours are constant and
	// valid, and the API returns usable no-op instruments on error anyway.
	// Durations are in seconds, with bucket boundaries advised as
	// OpenTelemetry's conventions do: the SDK's defaults (0 to 10000) suit
	// milliseconds and would put nearly every wait in the first bucket. A
	// wait runs from a fraction of a millisecond to a holder's lease, a hold
	// from milliseconds to minutes.
	waitBuckets := []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
	holdBuckets := []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	t.acquireDur, _ = m.Float64Histogram("redfence.lock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from a Lock or TryLock call to its outcome, by redfence.outcome."),
		metric.WithExplicitBucketBoundaries(waitBuckets...))
	t.acquired, _ = m.Int64Counter("redfence.lock.acquisitions", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Lock and TryLock outcomes, by redfence.outcome."))
	t.contention, _ = m.Int64Counter("redfence.lock.contention", metric.WithUnit("{attempt}"),
		metric.WithDescription("Attempts that found the lock held by another owner."))
	t.losses, _ = m.Int64Counter("redfence.lock.losses", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks lost: renewal found them gone or the lease deadline passed, by redfence.reason."))
	t.holdDur, _ = m.Float64Histogram("redfence.lock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time from acquisition to release or loss."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	t.held, _ = m.Int64UpDownCounter("redfence.lock.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks currently held by this process."))
	t.attemptErrs, _ = m.Int64Counter("redfence.lock.attempt.errors", metric.WithUnit("{attempt}"),
		metric.WithDescription("Acquisition attempts that failed on the way to or on the server, by error.type."))
	t.forcedRels, _ = m.Int64Counter("redfence.lock.forced_releases", metric.WithUnit("{release}"),
		metric.WithDescription("Locks freed by ForceRelease behind their holder's back, by redfence.reason."))
	t.renewals, _ = m.Int64Counter("redfence.lock.renewals", metric.WithUnit("{renewal}"),
		metric.WithDescription("Lease renewals, the renewer's and Extend's, by redfence.outcome: extended, not_held or error."))
	return t
}

// renewOutcomes are the outcomes a renewal records.
var renewOutcomes = []string{"extended", "not_held", "error"}

// lateRenewal reports whether a renewal's reply took more than a tenth of
// the lease: the margin the renewer retries within, so one that late is a
// warning of a slow store or a paused process.
func lateRenewal(rtt, lease time.Duration) bool { return rtt > lease/10 }

// renewal records a renewal that ran from start without a span of its own:
// the counter by outcome and, when it failed or came late (or
// WithRenewalSpans asks for every one), a span over it named name.
func (t *telemetry) renewal(ctx context.Context, name, key string, token int64, start time.Time, outcome string, err error, late bool) {
	t.renewals.Add(ctx, 1, t.outcomeAttrs(outcome).add...)
	if !t.renewalSpans && err == nil && !late {
		return
	}
	if t.global && isUnsetGlobal(otel.GetTracerProvider()) {
		return
	}
	_, span := t.tracer.Start(ctx, name, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(attrKey.String(key), attrToken.Int64(token), attrOutcome.String(outcome))
		if late {
			span.SetAttributes(attrLate.Bool(true))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// forced records a forced release: counted by reason (clipped, as a
// category should be short), and a span with the key and the tokens.
func (t *telemetry) forced(key string, token int64, reason string) {
	ctx := context.Background()
	if len(reason) > 64 {
		reason = strings.ToValidUTF8(reason[:64], "")
	}
	_, span := t.tracer.Start(ctx, "redfence.ForceRelease", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
		attrKey.String(key), attrToken.Int64(token), attrReason.String(reason)))
	span.End()
	t.forcedRels.Add(ctx, 1, metric.WithAttributes(attrReason.String(reason)))
}

// attemptFailed counts an acquisition attempt that failed on the server and
// records it on the call's span, so that a Lock retrying through an outage
// is visible before it gives up.
func (t *telemetry) attemptFailed(span trace.Span, err error) {
	typ := attrErrorType.String(errorType(err))
	t.attemptErrs.Add(context.Background(), 1, metric.WithAttributes(typ))
	if span.IsRecording() {
		span.RecordError(err, trace.WithAttributes(typ))
	}
}

// serverError is a reply the server sent as an error: go-redis's
// redis.Error, asked for by its method so that the core needs no go-redis.
type serverError interface {
	error
	RedisError()
}

// errorType is a low-cardinality class of an attempt's error, for OTel's
// error.type: a Redis error's prefix (NOPERM, LOADING, ...), "timeout", a
// network operation ("dial", "read", ...), a driver error's own ErrorType (Redlock: "quorum"), or "_OTHER".
func errorType(err error) string {
	var terr interface{ ErrorType() string }
	var rerr serverError
	var nerr net.Error
	var operr *net.OpError
	switch {
	case errors.As(err, &terr):
		return terr.ErrorType()
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout():
		return "timeout"
	case errors.As(err, &operr):
		return operr.Op
	case errors.As(err, &rerr):
		if word, _, _ := strings.Cut(rerr.Error(), " "); word != "" && strings.ToUpper(word) == word {
			return word
		}
	}
	return "_OTHER"
}

func (t *telemetry) lost(key string, token int64, reason string, held time.Duration) {
	ctx := context.Background()
	_, span := t.tracer.Start(ctx, "redfence.LockLost", trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(
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

// isUnsetGlobal reports whether tp is otel's global TracerProvider as it is
// before a program sets one: a delegating default, of a type in otel's
// internal/global package. Its spans do not record, yet each costs three
// allocations and a context. Told by its type, not by a value captured at
// some init, so that a provider set in any init is seen.
func isUnsetGlobal(tp trace.TracerProvider) bool {
	t := reflect.TypeOf(tp)
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// startSpan starts a span and, only when it records, sets the key and (when
// there is one, above zero) the token. Attributes built up front, or passed
// on as a variadic slice, would cost allocations on every call otherwise.
//
// A Locker on otel's global provider (no WithTracerProvider) starts nothing
// while that is still the unset default, and starts spans as soon as a
// provider is set (its tracer then delegates to it).
func (t *telemetry) startSpan(ctx context.Context, name, key string, token int64) (context.Context, trace.Span) {
	if t.global && isUnsetGlobal(otel.GetTracerProvider()) {
		return ctx, noop.Span{}
	}
	ctx, span := t.tracer.Start(ctx, name, t.spanOpts...)
	if span.IsRecording() {
		span.SetAttributes(attrKey.String(key))
		if token > 0 {
			span.SetAttributes(attrToken.Int64(token))
		}
	}
	return ctx, span
}

// startKeysSpan starts the span of a call over several keys (LockAll,
// Locks' methods) with their number, as startSpan does for one key.
func (t *telemetry) startKeysSpan(ctx context.Context, name string, keys int) (context.Context, trace.Span) {
	if t.global && isUnsetGlobal(otel.GetTracerProvider()) {
		return ctx, noop.Span{}
	}
	ctx, span := t.tracer.Start(ctx, name, t.spanOpts...)
	if span.IsRecording() {
		span.SetAttributes(attrKeys.Int(keys))
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
