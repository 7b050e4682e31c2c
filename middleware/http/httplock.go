package httplock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex"
)

// Roles, as set in the role header and on the span.
const (
	RoleLeader = "leader" // this request called the origin and shared the result
	RoleShared = "shared" // served a response another request made
	RoleBypass = "bypass" // called the origin without sharing (not eligible, not shareable, timed out, Redis down)
	RolePanic  = "panic"  // the leader panicked; answered with WithPanicStatus
)

var (
	// ErrInvalid is matched by New's errors for a bad configuration.
	ErrInvalid = errors.New("httplock: invalid configuration")

	errNilHandler = fmt.Errorf("%w: nil handler", ErrInvalid)
)

// cleanupTimeout bounds Redis work that must happen even when the request's
// context has ended: storing the response and releasing the lock.
const cleanupTimeout = 2 * time.Second

// New returns middleware that collapses identical concurrent requests across
// every replica sharing locker's Redis into one origin call. See the package
// documentation for what is shared and when. A nil locker or a bad option is
// reported here, wrapping ErrInvalid; New does no I/O.
//
// The middleware panics when applied to a nil handler (typed nil included),
// as http.Handle does: it has no error to return, and a handler that failed
// every request instead would hide the mistake until serving. The panic
// value is an error wrapping ErrInvalid. NewHandler returns it instead.
func New(locker *mutex.Locker, opts ...Option) (func(http.Handler) http.Handler, error) {
	cfg, err := build(locker, opts)
	if err != nil {
		return nil, err
	}
	return func(next http.Handler) http.Handler {
		if isNil(next) {
			panic(errNilHandler)
		}
		return newHandler(next, locker, cfg)
	}, nil
}

// NewHandler is New applied to next; a nil next (typed nil included) is an
// error wrapping ErrInvalid.
func NewHandler(next http.Handler, locker *mutex.Locker, opts ...Option) (http.Handler, error) {
	if isNil(next) {
		return nil, errNilHandler
	}
	cfg, err := build(locker, opts)
	if err != nil {
		return nil, err
	}
	return newHandler(next, locker, cfg), nil
}

func build(locker *mutex.Locker, opts []Option) (config, error) {
	cfg := newConfig(opts)
	if locker == nil {
		return cfg, fmt.Errorf("%w: nil locker", ErrInvalid)
	}
	if err := locker.Err(); err != nil {
		return cfg, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if len(cfg.errs) > 0 {
		return cfg, fmt.Errorf("%w: %w", ErrInvalid, errors.Join(cfg.errs...))
	}
	return cfg, nil
}

type handler struct {
	next    http.Handler
	locker  *mutex.Locker
	client  redis.UniversalClient
	sharded bool // Redis Cluster: sharded pub/sub
	cfg     config
	tel     telemetry

	mu      sync.Mutex
	flights map[string]*flight
}

// A flight is one in-process collapse: the first request for a key leads it,
// later ones wait for its result.
type flight struct {
	done chan struct{}
	aged time.Time // past it, the leader counts as stalled (lock age)
	res  *entry    // nil: nothing to share, the waiters call the origin
}

func newHandler(next http.Handler, locker *mutex.Locker, cfg config) *handler {
	return &handler{
		next:    next,
		locker:  locker,
		client:  locker.Client(),
		sharded: isCluster(locker.Client()),
		cfg:     cfg,
		tel:     newTelemetry(cfg.tp, cfg.mp),
		flights: map[string]*flight{},
	}
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tm := &timing{start: time.Now()}
	ctx, span := h.tel.tracer.Start(r.Context(), "redfence.httplock", trace.WithAttributes(
		attrMethod.String(r.Method), attrPath.String(r.URL.Path)))
	r = r.WithContext(context.WithValue(ctx, timingKey{}, tm))
	var role string
	defer func() { h.tel.end(span, role, tm.waited()) }()

	if reason := h.ineligible(r); reason != "" {
		role = h.origin(w, r, RoleBypass)
		return
	}
	key := h.key(r)
	wait := time.NewTimer(h.cfg.waitTimeout)
	defer wait.Stop()
	for {
		h.mu.Lock()
		fl, ok := h.flights[key]
		if !ok {
			fl = &flight{done: make(chan struct{}), aged: time.Now().Add(h.cfg.lockAge)}
			h.flights[key] = fl
		}
		h.mu.Unlock()
		if !ok {
			role = h.leadFlight(w, r, key, fl)
			return
		}
		switch h.follow(r, fl, wait.C) {
		case flightDone:
			if e := fl.res; e != nil {
				role = h.use(w, r, e)
				return
			}
		case flightAged:
			// The local leader is stalled past the lock age: retire its
			// flight, and lead or join the next one.
			h.mu.Lock()
			if h.flights[key] == fl {
				delete(h.flights, key)
			}
			h.mu.Unlock()
			continue
		}
		// Nothing to share, the wait timed out, or the client is gone (the
		// origin call then returns quickly on a handler that watches its
		// context, and its response goes nowhere).
		role = h.origin(w, r, RoleBypass)
		return
	}
}

// leadFlight leads the local flight for key: whatever happens, including a
// panic, the flight ends and its waiters are released.
func (h *handler) leadFlight(w http.ResponseWriter, r *http.Request, key string, fl *flight) string {
	st := &leadState{}
	defer func() {
		h.mu.Lock()
		if h.flights[key] == fl {
			delete(h.flights, key)
		}
		h.mu.Unlock()
		fl.res = st.res
		close(fl.done)
	}()
	return h.cluster(w, r, key, st)
}

type followOutcome int

const (
	flightDone followOutcome = iota
	flightAged
	followGaveUp
)

// follow waits for the local flight's leader, within the request's own
// context, the wait timeout and the flight's lock age.
func (h *handler) follow(r *http.Request, fl *flight, timeout <-chan time.Time) followOutcome {
	aged := time.NewTimer(time.Until(fl.aged))
	defer aged.Stop()
	select {
	case <-fl.done:
		return flightDone
	case <-aged.C:
		return flightAged
	case <-timeout:
	case <-r.Context().Done():
	}
	return followGaveUp
}

type leadState struct {
	res *entry // what the local flight's waiters get
}

// cluster runs the cross-process step for the local flight's leader: serve a
// response another replica already shared, or take the key's lock and become
// the one origin call, or wait for the lock holder's "ready" publication and
// look again, or give up waiting and call the origin.
//
// Waiting is on a context detached from the request (the local followers
// depend on it) and bounded by the wait timeout. Waiting replicas do not
// queue on the lock: one publication wakes them all and each reads the
// stored response with one GET. Polling (TryLock again) is only the
// fallback for a lost publication or a leader that stalled past the lock age.
func (h *handler) cluster(w http.ResponseWriter, r *http.Request, key string, st *leadState) string {
	detached := context.WithoutCancel(r.Context())
	wctx, cancel := context.WithTimeout(detached, h.cfg.waitTimeout)
	defer cancel()
	var ps *redis.PubSub
	defer func() {
		if ps != nil {
			_ = ps.Close()
		}
	}()
	for {
		if e := h.load(wctx, key); e != nil {
			st.res = e
			return h.use(w, r, e)
		}
		// The lock's lease is the lock age: a leader stalled past it lets
		// the next one through.
		lk, err := h.locker.TryLock(wctx, "httplock:"+key, mutex.WithTTL(h.cfg.lockAge), mutex.WithAutoRenew(false))
		if err == nil {
			unlock := func() {
				uctx, cancel := context.WithTimeout(detached, cleanupTimeout)
				defer cancel()
				_ = lk.Unlock(uctx) // ErrNotHeld after a stall past the lock age: nothing to undo
			}
			if e := h.load(wctx, key); e != nil { // shared while we took the lock
				unlock()
				st.res = e
				return h.use(w, r, e)
			}
			h.lead(w, r, key, st, unlock)
			return RoleLeader
		}
		if !errors.Is(err, mutex.ErrNotAcquired) || wctx.Err() != nil {
			h.tel.recordError(r.Context(), err)
			return h.origin(w, r, RoleBypass)
		}
		if ps == nil {
			// Subscribe, then look again: a publication between our GET and
			// the subscription is not missed.
			ps = h.subscribe(wctx, key)
			continue
		}
		h.awaitReady(wctx, ps)
	}
}

// subscribe listens for the key's "ready" publication; nil when that fails
// (waiting then falls back to polling).
func (h *handler) subscribe(ctx context.Context, key string) *redis.PubSub {
	ch := h.cfg.prefix + key + ":ready"
	var ps *redis.PubSub
	if h.sharded {
		ps = h.client.SSubscribe(ctx, ch)
	} else {
		ps = h.client.Subscribe(ctx, ch)
	}
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		_ = ps.Close()
		h.tel.recordError(ctx, err)
		return nil
	}
	return ps
}

// pollMin and pollMax bound the fallback poll while waiting for a leader.
const (
	pollMin = 100 * time.Millisecond
	pollMax = 200 * time.Millisecond
)

// awaitReady waits for a publication on ps, the fallback poll interval, or
// the end of ctx, whichever comes first.
func (h *handler) awaitReady(ctx context.Context, ps *redis.PubSub) {
	d := pollMin + rand.N(pollMax-pollMin)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		d = max(time.Until(dl), time.Millisecond)
	}
	if ps == nil {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return
	}
	_, _ = ps.ReceiveTimeout(ctx, d) // a message, a timeout, or an error: look again either way
}

func (h *handler) publishReady(ctx context.Context, key string) {
	ch := h.cfg.prefix + key + ":ready"
	var err error
	if h.sharded {
		err = h.client.SPublish(ctx, ch, "1").Err()
	} else {
		err = h.client.Publish(ctx, ch, "1").Err()
	}
	if err != nil {
		h.tel.recordError(ctx, err)
	}
}

// lead calls the origin for everyone: the handler runs on a context detached
// from the leader's client (bounded by the handler timeout), its response is
// captured, stored for the share window, and the lock released, which wakes
// the waiting replicas.
func (h *handler) lead(w http.ResponseWriter, r *http.Request, key string, st *leadState, unlock func()) {
	detached := context.WithoutCancel(r.Context())
	hctx, cancel := context.WithTimeout(detached, h.cfg.handlerLimit)
	defer cancel()
	normal := false
	defer func() {
		if !normal { // the handler panicked (or called runtime.Goexit)
			if h.cfg.panicStatus != 0 {
				st.res = &entry{Kind: kindPanic}
				h.store(detached, key, st.res)
			}
			unlock()
			h.publishReady(detached, key) // the waiters look again, and one leads
		}
	}()

	if h.cfg.roleHeader != "" {
		w.Header().Set(h.cfg.roleHeader, RoleLeader)
	}
	markWaited(r)
	c := newCapture(w, h.cfg.maxBody)
	h.tel.originCall(r.Context())
	h.next.ServeHTTP(c, r.WithContext(hctx))
	normal = true

	st.res = c.entry(r, h.cfg.roleHeader, h.cfg.shareStatus)
	h.store(detached, key, st.res)
	unlock()
	h.publishReady(detached, key)
}

// use serves e to r, or calls the origin when e says to.
func (h *handler) use(w http.ResponseWriter, r *http.Request, e *entry) string {
	markWaited(r)
	switch {
	case e.Kind == kindPanic && h.cfg.panicStatus != 0:
		h.setRole(w, RolePanic)
		w.WriteHeader(h.cfg.panicStatus)
		return RolePanic
	case e.Kind != kindResponse, !e.matches(r):
		return h.origin(w, r, RoleBypass)
	}
	dst := w.Header()
	for k, v := range e.Header {
		dst[k] = append([]string(nil), v...) // every follower gets its own copy
	}
	h.setRole(w, RoleShared)
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(e.Body)
	}
	h.tel.collapsed(r.Context())
	return RoleShared
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

// ineligible says why r must not be collapsed, or "".
func (h *handler) ineligible(r *http.Request) string {
	switch {
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		return "method"
	case !h.cfg.shareAuth && (r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != ""):
		return "credentials"
	case r.Header.Get("Range") != "":
		return "range"
	case r.Header.Get("Upgrade") != "":
		return "upgrade"
	}
	return ""
}

// key is a hash of everything that makes two requests identical: method,
// path and query, the WithVary headers and the WithKey part. Not the Host:
// replicas are often reached under different names (their own addresses,
// an internal and a public one); WithKey adds it for virtual hosting.
func (h *handler) key(r *http.Request) string {
	s := sha256.New()
	write := func(v string) {
		s.Write([]byte(v))
		s.Write([]byte{0})
	}
	write(r.Method)
	write(r.URL.RequestURI())
	for _, name := range h.cfg.vary {
		write(name)
		for _, v := range r.Header.Values(name) {
			write(v)
		}
	}
	if h.cfg.key != nil {
		write(h.cfg.key(r))
	}
	return hex.EncodeToString(s.Sum(nil)[:16])
}

func isCluster(c redis.UniversalClient) bool {
	_, ok := c.(*redis.ClusterClient)
	return ok
}

func (h *handler) load(ctx context.Context, key string) *entry {
	b, err := h.client.Get(ctx, h.cfg.prefix+key).Bytes()
	if err != nil {
		if !errors.Is(err, redis.Nil) {
			h.tel.recordError(ctx, err)
		}
		return nil
	}
	e, err := decode(b)
	if err != nil {
		h.tel.recordError(ctx, err)
		return nil
	}
	return e
}

func (h *handler) store(detached context.Context, key string, e *entry) {
	b, err := e.encode()
	if err != nil {
		h.tel.recordError(detached, err)
		return
	}
	ctx, cancel := context.WithTimeout(detached, cleanupTimeout)
	defer cancel()
	if err := h.client.Set(ctx, h.cfg.prefix+key, b, h.cfg.shareWindow).Err(); err != nil {
		h.tel.recordError(ctx, err)
	}
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
