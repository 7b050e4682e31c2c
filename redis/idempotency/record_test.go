package idempotency_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/redis/idempotency"
)

// Requests and handlers at the edges of the contract: each test checks
// what record a key gets (none, its own, the same for every retry) and
// what its clients are answered.

// TestScopeKeyConcatenation: scope and key that concatenate alike
// ("a"+"bxy", "ab"+"xy"), keys that differ only by an escape, and quotes or
// backslashes in the scope never share a record; a bare key is its
// String's key.
func TestScopeKeyConcatenation(t *testing.T) {
	_, srv := redistest.Redis(t)
	h := &charge{}
	rep := replicasOn(t, srv, 1, h, nil)[0]
	c := client(t)
	at := func(tenant, key string) req { return req{tenant: tenant, key: key, body: "{}"} }
	for i, rq := range []req{
		at("ab", `"xy"`),
		at("a", `"bxy"`),
		at("abx", `"y"`),
		at("ab", `"x\\y"`),
		at(`ab"`, `"xy"`),
		at("ab\\", `"xy"`),
		at("ab", `"xy\""`),
	} {
		res := mustPost(t, c, rep.URL, rq)
		assert.Equal(t, http.StatusCreated, res.status, "%d %+v", i, rq)
		assert.False(t, res.replayed(), "%d %+v", i, rq)
	}
	assert.True(t, mustPost(t, c, rep.URL, at("ab", "xy")).replayed(), "the bare key is the String's key")
}

// TestKeyBytes: control characters, non-ASCII and a 256th character
// are refused before the handler, and a key at 255 characters made of
// escapes is accepted.
func TestKeyBytes(t *testing.T) {
	_, srv := redistest.Redis(t)
	h := &charge{}
	rep := replicasOn(t, srv, 1, h, nil)[0]
	for _, k := range []string{"\"a\x01b\"", "\"a\x7fb\"", "\"é\"", `"` + strings.Repeat(`\\`, 256) + `"`} {
		r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader("{}"))
		r.Header.Set(scopeHeader, "acme")
		r.Header.Set(idempotency.HeaderName, k)
		w := httptest.NewRecorder()
		rep.handler.ServeHTTP(w, r)
		assert.Equal(t, http.StatusBadRequest, w.Code, "%q", k)
	}
	res := mustPost(t, client(t), rep.URL, req{tenant: "acme", key: `"` + strings.Repeat(`\\`, 255) + `"`, body: "{}"})
	assert.Equal(t, http.StatusCreated, res.status)
	assert.EqualValues(t, 1, h.calls.Load())
}

// TestQueryOrderIs422WhileProcessing: the same key with the query's
// parameters in another order is another request: 422 while the first
// runs.
func TestQueryOrderIs422WhileProcessing(t *testing.T) {
	_, srv := redistest.Redis(t)
	started, release := make(chan struct{}), make(chan struct{})
	h := &charge{hold: func() { close(started); <-release }}
	rep := replicasOn(t, srv, 1, h, nil)[0]
	c := client(t)
	send := func(q string) result {
		r, err := http.NewRequest(http.MethodPost, rep.URL+"/payments?"+q, strings.NewReader("{}"))
		require.NoError(t, err)
		r.Header.Set(scopeHeader, "acme")
		r.Header.Set(idempotency.HeaderName, key)
		resp, err := c.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}
	first := make(chan result, 1)
	go func() { first <- send("a=1&b=2") }()
	<-started
	res := send("b=2&a=1")
	assert.Equal(t, http.StatusUnprocessableEntity, res.status)
	assert.Equal(t, idempotency.ProblemMismatch, problemType(t, res))
	close(release)
	assert.Equal(t, http.StatusCreated, (<-first).status)
}

type failingBody struct{ n int }

func (b *failingBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		b.n++
		return copy(p, "{\"amo"), nil
	}
	return 0, errors.New("connection reset mid-body")
}

// TestBodyErrorLeavesNothing: a body that fails mid-read is 400
// problem+json, before the handler, and leaves no record.
func TestBodyErrorLeavesNothing(t *testing.T) {
	rdb, srv := redistest.Redis(t)
	h := &charge{}
	rep := replicasOn(t, srv, 1, h, nil)[0]
	r := httptest.NewRequest(http.MethodPost, "/payments", io.NopCloser(&failingBody{}))
	r.Header.Set(scopeHeader, "acme")
	r.Header.Set(idempotency.HeaderName, key)
	w := httptest.NewRecorder()
	rep.handler.ServeHTTP(w, r)
	assert.Equal(t, http.StatusBadRequest, w.Code)
	assert.Equal(t, "application/problem+json", w.Header().Get("Content-Type"))
	assert.True(t, json.Valid(w.Body.Bytes()))
	assert.EqualValues(t, 0, h.calls.Load())
	keys, err := rdb.Keys(t.Context(), "*").Result()
	require.NoError(t, err)
	assert.Empty(t, keys)
}

// TestWritesOutsideTheStatusLine: headers set after WriteHeader are
// neither sent nor replayed (as net/http); a 103 goes to the first client
// only; a handler that writes nothing is 200, empty, on both; a flush
// through http.ResponseController makes the response unstored.
func TestWritesOutsideTheStatusLine(t *testing.T) {
	_, srv := redistest.Redis(t)
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		switch r.URL.Query().Get("case") {
		case "late-header":
			w.WriteHeader(http.StatusAccepted)
			w.Header().Set("X-After", "late")
			_, _ = io.WriteString(w, "ok")
		case "early-hints":
			w.Header().Set("Link", "</style.css>; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.WriteHeader(http.StatusCreated)
		case "nothing":
		case "controller":
			_, _ = io.WriteString(w, "part")
			_ = http.NewResponseController(w).Flush()
		}
	})
	reps := replicasOn(t, srv, 2, h, nil)
	c := client(t)
	do := func(rep replica, cs string) result {
		r, err := http.NewRequest(http.MethodPost, rep.URL+"/payments?case="+cs, strings.NewReader("{}"))
		require.NoError(t, err)
		r.Header.Set(scopeHeader, "acme")
		r.Header.Set(idempotency.HeaderName, `"`+cs+`"`)
		resp, err := c.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}
	for _, tc := range []struct {
		cs     string
		status int
	}{{"late-header", http.StatusAccepted}, {"early-hints", http.StatusCreated}, {"nothing", http.StatusOK}} {
		first, again := do(reps[0], tc.cs), do(reps[1], tc.cs)
		assert.Equal(t, tc.status, first.status, tc.cs)
		assert.Equal(t, first.status, again.status, tc.cs)
		assert.Equal(t, first.body, again.body, tc.cs)
		assert.Equal(t, first.header.Get("Content-Length"), again.header.Get("Content-Length"), tc.cs)
		assert.Empty(t, first.header.Get("X-After"), tc.cs)
		assert.Empty(t, again.header.Get("X-After"), tc.cs)
		assert.True(t, again.replayed(), tc.cs)
	}
	first, again := do(reps[0], "controller"), do(reps[1], "controller")
	assert.Equal(t, "part", first.body)
	assert.Equal(t, idempotency.ProblemNotStored, problemType(t, again))
	assert.EqualValues(t, 4, calls.Load())
}

// TestPanicAfterFlushReleasesKey: a handler that streamed part of
// its answer and then panicked leaves no record of a response: its key is
// released at once, as after a crash, not held until the lease ends.
func TestPanicAfterFlushReleasesKey(t *testing.T) {
	_, srv := redistest.Redis(t)
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			_, _ = io.WriteString(w, "partial")
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler)
		}
		w.WriteHeader(http.StatusCreated)
	})
	rep := replicasOn(t, srv, 1, h, nil)[0]
	c := client(t)
	rq := req{tenant: "acme", key: key, body: "{}"}
	_ = post(t.Context(), c, rep.URL, rq)
	assert.Equal(t, http.StatusCreated, mustPost(t, c, rep.URL, rq).status, "not stuck in processing until the lease")
	assert.EqualValues(t, 2, calls.Load())
}

// TestTwoStallsThenRetryFails: the first attempt stalls past its
// lease, the retry that took over stalls too, and a third attempt's
// handler fails (500). Its failure is the key's result: both late
// attempts' clients get it, and so does every later retry, byte for byte.
func TestTwoStallsThenRetryFails(t *testing.T) {
	srv := redistest.StartRedis(t)
	pa, pb := testutil.Proxy(t, srv.Addr()), testutil.Proxy(t, srv.Addr())
	startedA, startedB := make(chan struct{}), make(chan struct{})
	relA, relB := make(chan struct{}), make(chan struct{})
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch i := n.Add(1); i {
		case 1:
			close(startedA)
			<-relA
		case 2:
			close(startedB)
			<-relB
		default:
			http.Error(w, fmt.Sprint("ledger down, call ", i), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "late success")
	})
	const lease = 200 * time.Millisecond
	opts := []idempotency.Option{idempotency.WithTTL(lease), idempotency.WithStoreTimeout(100 * time.Millisecond)}
	a := replicaWith(t, redis.NewClient(&redis.Options{Addr: pa.Addr(), ContextTimeoutEnabled: true}), h, nil, opts...)
	b := replicaWith(t, redis.NewClient(&redis.Options{Addr: pb.Addr(), ContextTimeoutEnabled: true}), h, nil, opts...)
	cr := replicaWith(t, srv.Client(), h, nil)
	c := client(t)
	rq := req{tenant: "acme", key: key, body: "{}"}
	until := func(url string) chan result {
		out := make(chan result, 1)
		go func() {
			for {
				if res := post(t.Context(), c, url, rq); res.err != nil || res.status != http.StatusConflict {
					out <- res
					return
				}
			}
		}()
		return out
	}
	fromA := make(chan result, 1)
	go func() { fromA <- post(t.Context(), c, a.URL, rq) }()
	<-startedA
	pa.BlackHole()
	fromB := until(b.URL)
	<-startedB
	pb.BlackHole()
	third := <-until(cr.URL)
	require.NoError(t, third.err)
	require.Equal(t, http.StatusInternalServerError, third.status)
	for _, late := range []struct {
		p   *testutil.TCPProxy
		rel chan struct{}
		res chan result
	}{{pb, relB, fromB}, {pa, relA, fromA}} {
		late.p.Cut()
		late.p.Heal()
		close(late.rel)
		res := <-late.res
		require.NoError(t, res.err)
		assert.Equal(t, third.status, res.status)
		assert.Equal(t, third.body, res.body)
	}
	for _, rep := range []replica{a, b, cr} {
		later := mustPost(t, c, rep.URL, rq)
		assert.Equal(t, third.status, later.status)
		assert.Equal(t, third.body, later.body)
		assert.Equal(t, third.header.Get("Content-Length"), later.header.Get("Content-Length"))
		assert.True(t, later.replayed())
	}
	assert.EqualValues(t, 3, n.Load())
}

// TestFastConcurrentPostsRunOnce: 50 identical POSTs over three
// replicas, with a handler that answers at once, so that requests cross
// the first one's completion between their open, TryLock and claim: the
// handler runs once, and every other answer is 409 or its replay, byte
// for byte.
func TestFastConcurrentPostsRunOnce(t *testing.T) {
	_, srv := redistest.Redis(t)
	h := &charge{}
	reps := replicasOn(t, srv, 3, h, nil)
	c := client(t)
	rq := req{tenant: "acme", key: key, body: `{"amount":100}`}
	results := make([]result, 50)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = mustPost(t, c, reps[i%3].URL, rq) })
	}
	wg.Wait()
	require.EqualValues(t, 1, h.calls.Load())
	for _, res := range results {
		if res.status == http.StatusConflict {
			assert.Equal(t, idempotency.ProblemInProgress, problemType(t, res))
			continue
		}
		assert.Equal(t, http.StatusCreated, res.status)
		assert.Equal(t, `{"charge":1,"request":{"amount":100}}`, res.body)
		assert.Equal(t, "ch_1", res.header.Get("X-Charge-Id"))
	}
}

// TestHijackedIsNotStored: a handler that hijacks the connection
// (through http.ResponseController) answers its own client; a retry is
// 409 not stored, and the handler never runs again.
func TestHijackedIsNotStored(t *testing.T) {
	_, srv := redistest.Redis(t)
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString("HTTP/1.1 201 Created\r\nContent-Length: 6\r\nConnection: close\r\n\r\nraw ok")
		_ = buf.Flush()
	})
	reps := replicasOn(t, srv, 2, h, nil)
	c := client(t)
	rq := req{tenant: "acme", key: key, body: "{}"}
	first := mustPost(t, c, reps[0].URL, rq)
	assert.Equal(t, "raw ok", first.body)
	// The client has its answer when the handler flushes, before the
	// middleware marks the record: until then a retry is "in progress".
	var again result
	waitFor(t, "the record marked not stored", func() bool {
		again = mustPost(t, c, reps[1].URL, rq)
		return problemType(t, again) != idempotency.ProblemInProgress
	})
	assert.Equal(t, idempotency.ProblemNotStored, problemType(t, again))
	assert.EqualValues(t, 1, calls.Load())
}
