package httplock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/typednil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/internal/bounded"
	"github.com/redfence/redfence/redis/redisdriver"
)

// Roles, as set in the role header and on the span.
const (
	RoleLeader = "leader" // this request called the origin and shared the result (in-process only while Redis is down)
	RoleShared = "shared" // served a response another request made
	RoleBypass = "bypass" // called the origin without sharing (not eligible, not shareable, timed out)
	RolePanic  = "panic"  // the leader it waited on panicked; answered with WithPanicStatus
)

var (
	// ErrInvalid is matched by New's errors for a bad configuration; it is
	// mutex.ErrInvalid, so one errors.Is check serves every package.
	ErrInvalid = mutex.ErrInvalid

	// ErrNeedsRedis is matched, with ErrInvalid, by New's error for a
	// Locker whose backend lends no Redis client (redisdriver.ClientOf is
	// nil): Redlock's, whose masters hold no single copy of the responses,
	// etcd's, or another backend that is no redisdriver.ClientHolder.
	// Shared responses live in one Redis deployment.
	ErrNeedsRedis = fmt.Errorf("httplock: %w: the Locker lends no Redis client", ErrInvalid)

	errNilHandler = fmt.Errorf("httplock: %w: nil handler", ErrInvalid)
)

// New returns middleware that collapses identical concurrent requests across
// every replica sharing locker's Redis into one origin call. See the package
// documentation for what is shared and when. The responses are kept in the
// Redis deployment whose client the Locker's backend lends
// (redisdriver.ClientOf). A nil locker, a Locker whose backend lends no
// Redis client (ErrNeedsRedis: Redlock's, whose masters hold no single copy
// of the responses, or etcd's) or a bad option is reported here, wrapping
// ErrInvalid; New does no I/O.
//
// The handlers the middleware makes share one view of Redis's health: after
// one of them finds Redis down, none calls it until a probe finds it back.
//
// The middleware panics when applied to a nil handler (typed nil included),
// as http.Handle does: it has no error to return, and a handler that failed
// every request instead would hide the mistake until serving. The panic
// value is an error wrapping ErrInvalid.
func New(locker *mutex.Locker, opts ...Option) (func(http.Handler) http.Handler, error) {
	cfg, client, err := build(locker, opts)
	if err != nil {
		return nil, err
	}
	hl := newHealth(client, cfg.storeTimeout)
	return func(next http.Handler) http.Handler {
		if typednil.Is(next) {
			panic(errNilHandler)
		}
		return newHandler(next, locker, client, cfg, hl)
	}, nil
}

// build applies opts and returns the Redis client of locker's backend, or
// an error wrapping ErrInvalid.
func build(locker *mutex.Locker, opts []Option) (config, redis.UniversalClient, error) {
	cfg := newConfig(opts)
	if locker == nil {
		return cfg, nil, fmt.Errorf("httplock: %w: nil locker", ErrInvalid)
	}
	client := redisdriver.ClientOf(locker.Backend())
	if client == nil {
		// Shared responses live in one Redis; on a Redlock Locker they
		// would rest on one of its masters, silently.
		return cfg, nil, fmt.Errorf("%w: the Locker's backend lends none (Redlock, etcd, or another that is no redisdriver.ClientHolder), and httplock keeps shared responses in one Redis deployment: give it a Locker over redisdriver", ErrNeedsRedis)
	}
	if len(cfg.errs) > 0 {
		return cfg, nil, fmt.Errorf("httplock: %w: %w", ErrInvalid, errors.Join(cfg.errs...))
	}
	return cfg, client, nil
}

// handler is the middleware around one next. Lock order: mu, then nothing
// (health has its own).
type handler struct {
	next     http.Handler
	locker   *mutex.Locker
	client   redis.UniversalClient
	ctxAware bool // client ends calls at their ctx's deadline (bounded)
	sharded  bool // Redis Cluster: sharded pub/sub
	cfg      config
	tel      telemetry
	health   *health // shared by the handlers of one New

	mu      sync.Mutex // guards flights
	flights map[string]*flight
}

func newHandler(next http.Handler, locker *mutex.Locker, client redis.UniversalClient, cfg config, hl *health) *handler {
	return &handler{
		next:     next,
		locker:   locker,
		client:   client,
		ctxAware: bounded.Aware(client),
		sharded:  isCluster(client),
		cfg:      cfg,
		tel:      newTelemetry(cfg.tp, cfg.mp),
		health:   hl,
		flights:  map[string]*flight{},
	}
}

func isCluster(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tm := &timing{start: time.Now()}
	// INTERNAL: it wraps the user's handler; the SERVER span is otelhttp's.
	ctx, span := h.tel.tracer.Start(r.Context(), "redfence.httplock", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrMethod.String(r.Method), attrPath.String(r.URL.Path)))
	r = r.WithContext(context.WithValue(ctx, timingKey{}, tm))
	var role string
	defer func() { h.tel.end(span, role, tm.waited()) }()

	if reason := h.ineligible(r); reason != "" {
		span.SetAttributes(attrBypass.String(reason))
		role = h.origin(w, r, RoleBypass)
		return
	}
	if !h.health.up() {
		// Redis is not called on this request's path (leadFlight collapses
		// in-process only); at most, a probe starts in the background.
		h.health.probeIfDue()
	}
	// The whole wait, whatever happens on the way, is bounded from here.
	key := h.key(r)
	span.SetAttributes(attrKey.String(lockKey(key)))
	role = h.collapse(w, r, key, tm.start.Add(h.cfg.wait))
}

// use serves e to r, or calls the origin when r may not be given e (it
// differs in a header e varies on, or does not accept e's content coding).
func (h *handler) use(w http.ResponseWriter, r *http.Request, e *entry) string {
	markWaited(r)
	if !e.matches(r) {
		return h.origin(w, r, RoleBypass)
	}
	dst := w.Header()
	for k, v := range e.Header {
		dst[k] = append([]string(nil), v...) // every follower gets its own copy
	}
	h.setRole(w, RoleShared)
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead && len(e.Body) > 0 {
		_, _ = w.Write(bytes.Clone(e.Body)) // a writer that changes what it is given changes nobody else's
	}
	h.tel.collapsed(r.Context())
	return RoleShared
}

// afterPanic answers a request that waited on a leader whose handler
// panicked: WithPanicStatus, or its own origin call when that is unset.
func (h *handler) afterPanic(w http.ResponseWriter, r *http.Request) string {
	if h.cfg.panicStatus == 0 {
		return h.origin(w, r, RoleBypass)
	}
	markWaited(r)
	h.setRole(w, RolePanic)
	w.WriteHeader(h.cfg.panicStatus)
	return RolePanic
}

func (h *handler) origin(w http.ResponseWriter, r *http.Request, role string) string {
	markWaited(r)
	h.setRole(w, role)
	h.tel.originCall(r.Context())
	h.next.ServeHTTP(w, r)
	return role
}

func (h *handler) setRole(w http.ResponseWriter, role string) {
	if h.cfg.roleHeader != "" {
		w.Header().Set(h.cfg.roleHeader, role)
	}
}
