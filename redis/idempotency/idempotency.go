package idempotency

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/typednil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/internal/bounded"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redisfence"
)

// Outcomes, as the span's redfence.idempotency.outcome says.
const (
	OutcomeHandled    = "handled"     // the handler ran for this request
	OutcomeReplayed   = "replayed"    // the stored response was replayed
	OutcomeConflict   = "conflict"    // 409: a request with the key is running, or its response was not stored
	OutcomeMismatch   = "mismatch"    // 422: the key was used with another payload
	OutcomeMissingKey = "missing_key" // 400
	OutcomeBadRequest = "bad_request" // 400 (invalid key, unreadable body), 403 (no scope), 413
	OutcomeSkipped    = "skipped"     // not covered: another method, or no key where it is optional
	OutcomeRedisDown  = "redis_down"  // Redis failed before the handler: 503, or passed through (WithOnUnavailable)
	OutcomeSuperseded = "superseded"  // the handler ran, but lost its key: its result was refused, or not stored and withheld
)

var (
	// ErrInvalid is matched by New's errors for a bad configuration; it is
	// mutex.ErrInvalid, so one errors.Is check serves every package.
	ErrInvalid = mutex.ErrInvalid

	// ErrNeedsRedis is matched, with ErrInvalid, by New's error for a
	// Locker whose backend lends no Redis client (redisdriver.ClientOf is
	// nil: Redlock's, or one over etcd): the records and their fences live
	// in one Redis deployment.
	ErrNeedsRedis = fmt.Errorf("idempotency: %w: the Locker's backend lends no Redis client", ErrInvalid)

	errNilHandler = fmt.Errorf("idempotency: %w: nil handler", ErrInvalid)

	errEnded = errors.New("idempotency: the request's context ended before the middleware ran")
)

// New returns middleware that runs a request with an Idempotency-Key once,
// across every replica sharing the Redis whose client locker's backend
// lends (redisdriver.ClientOf), and replays its response to
// retries (see the package documentation). scope names the request's
// principal or tenant: records of two scopes are never shared, whatever
// their keys. It is required, and should return "" for a request without
// one, which is refused (403). A nil locker or scope, a Locker whose
// backend lends no Redis client (ErrNeedsRedis) or a bad option is
// reported here, wrapping ErrInvalid; New does no I/O.
//
// The middleware panics when applied to a nil handler (typed nil included),
// as http.Handle does, with an error wrapping ErrInvalid.
func New(locker *mutex.Locker, scope func(r *http.Request) string, opts ...Option) (func(http.Handler) http.Handler, error) {
	b, err := build(locker, scope, opts)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		if typednil.Is(next) {
			panic(errNilHandler)
		}
		return newHandler(next, locker, scope, b)
	}, nil
}

// built is what New makes once for the handlers of its middleware.
type built struct {
	cfg    config
	client redis.UniversalClient // lent by the Locker's backend
	fence  *redisfence.Fence
}

// build applies opts and makes the fence over the Redis client of locker's
// backend, or returns an error wrapping ErrInvalid.
func build(locker *mutex.Locker, scope func(*http.Request) string, opts []Option) (built, error) {
	b := built{cfg: newConfig(opts)}
	if locker == nil {
		return b, fmt.Errorf("idempotency: %w: nil locker", ErrInvalid)
	}
	b.client = redisdriver.ClientOf(locker.Backend())
	switch {
	case b.client == nil:
		return b, fmt.Errorf("%w (Redlock, etcd, or another that is no redisdriver.ClientHolder): give it a Locker over redisdriver", ErrNeedsRedis)
	case scope == nil:
		return b, fmt.Errorf("idempotency: %w: nil scope function: records must be kept per principal or tenant", ErrInvalid)
	case len(b.cfg.errs) > 0:
		return b, fmt.Errorf("idempotency: %w: %w", ErrInvalid, errors.Join(b.cfg.errs...))
	}
	if _, ring := b.client.(*redis.Ring); ring {
		return b, fmt.Errorf("idempotency: %w: a *redis.Ring cannot fence (redisfence)", ErrInvalid)
	}
	// The fence outlives the record it guards by as long as the record
	// lives: a holder later than that finds neither.
	f, err := redisfence.New(b.client, redisfence.WithFenceTTL(b.cfg.expiry))
	if err != nil {
		return b, fmt.Errorf("idempotency: %w: the fence: %w", ErrInvalid, err)
	}
	b.fence = f
	return b, nil
}

// handler is the middleware around one next.
type handler struct {
	next   http.Handler
	scope  func(*http.Request) string
	locker *mutex.Locker
	client redis.UniversalClient
	aware  bool // the client ends calls at their ctx's deadline (bounded)
	fence  *redisfence.Fence
	cfg    config
	tel    telemetry
	calls  sync.WaitGroup // commands requests stopped waiting for (bounded), for tests
}

func newHandler(next http.Handler, locker *mutex.Locker, scope func(*http.Request) string, b built) *handler {
	return &handler{
		next:   next,
		scope:  scope,
		locker: locker,
		client: b.client,
		aware:  bounded.Aware(b.client),
		fence:  b.fence,
		cfg:    b.cfg,
		tel:    newTelemetry(b.cfg.tp, b.cfg.mp),
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// INTERNAL: it wraps the user's handler; the SERVER span is otelhttp's.
	ctx, span := h.tel.tracer.Start(r.Context(), "redfence.idempotency", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrMethod.String(r.Method), attrPath.String(r.URL.Path)))
	outcome := OutcomeHandled // a panicking handler ran
	defer func() { h.tel.end(span, outcome, time.Since(start)) }()
	outcome = h.serve(w, r.WithContext(ctx))
}

// serve checks the request, in the order the answers are given: not
// covered, key invalid or missing (400), no scope (403), body too large
// (413); then the record decides (idempotent).
func (h *handler) serve(w http.ResponseWriter, r *http.Request) string {
	if !slices.Contains(h.cfg.methods, r.Method) {
		h.callNext(w, r)
		return OutcomeSkipped
	}
	key, present, err := parseKey(r.Header.Values(HeaderName), h.cfg.maxKeyLen)
	switch {
	case err != nil:
		writeProblem(w, http.StatusBadRequest, ProblemKeyInvalid, err.Error(), 0)
		return OutcomeBadRequest
	case !present && h.cfg.optional:
		h.callNext(w, r)
		return OutcomeSkipped
	case !present:
		writeProblem(w, http.StatusBadRequest, ProblemKeyMissing, "this request needs an Idempotency-Key header", 0)
		return OutcomeMissingKey
	}
	scope := h.scope(r)
	if scope == "" {
		writeProblem(w, http.StatusForbidden, ProblemNoScope, "no principal to keep the Idempotency-Key under", 0)
		return OutcomeBadRequest
	}
	var body []byte
	if h.cfg.fpBody {
		if body, err = readBody(r, h.cfg.maxRequest); errors.Is(err, errBodyTooLarge) {
			writeProblem(w, http.StatusRequestEntityTooLarge, ProblemTooLarge, fmt.Sprintf("the body is over %d bytes", h.cfg.maxRequest), 0)
			return OutcomeBadRequest
		} else if err != nil {
			writeProblem(w, http.StatusBadRequest, ProblemBody, "reading the body: "+err.Error(), 0)
			return OutcomeBadRequest
		}
	}
	id := recordID(scope, key)
	trace.SpanFromContext(r.Context()).SetAttributes(attrKey.String(LockPrefix + id))
	return h.idempotent(w, r, id, fingerprint(r, h.cfg.fpHeaders, body, h.cfg.fpBody))
}

// idempotent decides from the record: a different fingerprint 422, a
// stored response replayed, one not stored 409; else the lock: held by
// another 409, taken: the handler runs (run).
func (h *handler) idempotent(w http.ResponseWriter, r *http.Request, id, fp string) string {
	ctx := r.Context()
	if ctx.Err() != nil {
		return h.down(w, r, fmt.Errorf("%w: %w", errEnded, context.Cause(ctx)))
	}
	rec, err := h.open(ctx, id, fp)
	if err != nil {
		return h.down(w, r, err)
	}
	if rec != nil && (rec.FP != fp || rec.State != stateProcessing) {
		return h.answer(w, r, rec, fp)
	}
	lk, err := h.tryLock(ctx, id)
	if err != nil {
		return h.down(w, r, err)
	}
	if lk == nil {
		return h.answer(w, r, &record{State: stateProcessing, FP: fp}, fp)
	}
	if rec, err = h.take(ctx, id, fp, lk.Token()); err != nil || rec != nil {
		h.unlock(context.WithoutCancel(ctx), lk)
		if err != nil {
			return h.down(w, r, err)
		}
		return h.answer(w, r, rec, fp)
	}
	return h.run(w, r, id, fp, lk)
}

// answer serves rec, a record this request did not make.
func (h *handler) answer(w http.ResponseWriter, r *http.Request, rec *record, fp string) string {
	switch {
	case rec.FP != fp:
		writeProblem(w, http.StatusUnprocessableEntity, ProblemMismatch,
			"this Idempotency-Key was used with another request (method, path, query, headers or body)", 0)
		return OutcomeMismatch
	case rec.State == stateDone:
		h.replay(w, r, rec)
		return OutcomeReplayed
	case rec.State == stateUnstored:
		writeProblem(w, http.StatusConflict, ProblemNotStored, fmt.Sprintf(
			"the request with this Idempotency-Key was processed (status %d), but its response was not stored (%s); use a new key to repeat it", rec.Status, rec.Reason), 0)
		return OutcomeConflict
	}
	writeProblem(w, http.StatusConflict, ProblemInProgress, "a request with this Idempotency-Key is being processed", h.retryAfter())
	return OutcomeConflict
}

func (h *handler) retryAfter() int { return int(h.cfg.retryAfter / time.Second) }

// replay sends a stored response: its status, the handler's headers (its
// values appended to the retry's outer middleware's where the handler
// appended to them, else set), its body, and the replay header.
func (h *handler) replay(w http.ResponseWriter, r *http.Request, rec *record) {
	dst := w.Header()
	for k, v := range rec.Header {
		if slices.Contains(rec.Append, k) {
			dst[k] = append(dst[k], v...)
		} else {
			dst[k] = slices.Clone(v)
		}
	}
	if h.cfg.replayHeader != "" {
		dst.Set(h.cfg.replayHeader, "true")
	}
	w.WriteHeader(rec.Status)
	if len(rec.Body) > 0 {
		_, _ = w.Write(rec.Body)
	}
	h.tel.replayed(r.Context())
}

// down answers a request whose Redis call failed before its handler ran:
// 503, or the handler unprotected (WithOnUnavailable). A request that ended
// before the middleware ran (errEnded) or whose client went away failed
// for that, not for Redis: it is never passed through, for its key may
// hold a response. A deadline spent waiting for Redis is Redis's failure.
func (h *handler) down(w http.ResponseWriter, r *http.Request, err error) string {
	h.tel.recordError(r.Context(), err)
	gone := errors.Is(err, errEnded) || errors.Is(r.Context().Err(), context.Canceled)
	if h.cfg.onDown == PassThrough && !gone {
		h.callNext(w, r)
	} else {
		writeProblem(w, http.StatusServiceUnavailable, ProblemUnavailable, "idempotency keys cannot be checked now", h.retryAfter())
	}
	return OutcomeRedisDown
}

func (h *handler) callNext(w http.ResponseWriter, r *http.Request) {
	h.tel.handlerCall(r.Context())
	h.next.ServeHTTP(w, r)
}
