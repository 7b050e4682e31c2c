package idempotency_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/idempotency"
)

const key = `"8e03978e-40d5-43e8-bc93-6894a57f9324"`

// charge is a payment handler: it counts its calls and answers 201 with the
// call's number, so a response tells which call made it.
type charge struct {
	calls atomic.Int64
	hold  func() // runs before the answer, when set
}

func (c *charge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.calls.Add(1)
	body, _ := io.ReadAll(r.Body)
	if c.hold != nil {
		c.hold()
	}
	w.Header().Set("X-Charge-Id", fmt.Sprint("ch_", n))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"charge":%d,"request":%s}`, n, body)
}

// problemType reads the type of a problem+json answer.
func problemType(t *testing.T, res result) string {
	t.Helper()
	require.Equal(t, "application/problem+json", res.header.Get("Content-Type"), res.body)
	var p struct {
		Type   string `json:"type"`
		Status int    `json:"status"`
	}
	require.NoError(t, json.Unmarshal([]byte(res.body), &p), res.body)
	assert.Equal(t, res.status, p.Status)
	return p.Type
}

// TestConcurrentIdenticalPostsRunOnce: 50 identical POSTs at once, spread
// over three replicas, run the handler once. The handler does not answer
// until the 49 others have been answered, so each of them was answered
// while it ran: 409 with Retry-After. Retries after it finished, on every
// replica, get its status, headers and body byte for byte, marked replays.
func TestConcurrentIdenticalPostsRunOnce(t *testing.T) {
	_, srv := redistest.Redis(t)
	var answered atomic.Int64
	h := &charge{}
	h.hold = func() { waitFor(t, "the other 49 answered", func() bool { return answered.Load() == 49 }) }
	reps := replicasOn(t, srv, 3, h, nil)
	c := client(t)
	rq := req{tenant: "acme", key: key, body: `{"amount":100}`}

	results := make([]result, 50)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() {
			results[i] = mustPost(t, c, reps[i%3].URL, rq)
			if results[i].status != http.StatusCreated {
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	require.EqualValues(t, 1, h.calls.Load(), "the handler ran once")
	var first result
	for _, res := range results {
		if res.status == http.StatusCreated {
			first = res
			continue
		}
		require.Equal(t, http.StatusConflict, res.status, res.body)
		assert.Equal(t, idempotency.ProblemInProgress, problemType(t, res))
		assert.Equal(t, "1", res.header.Get("Retry-After"))
	}
	require.Equal(t, `{"charge":1,"request":{"amount":100}}`, first.body)
	assert.False(t, first.replayed())
	for _, rep := range reps {
		again := mustPost(t, c, rep.URL, rq)
		assert.Equal(t, first.status, again.status)
		assert.Equal(t, first.body, again.body, "byte-identical")
		assert.Equal(t, "ch_1", again.header.Get("X-Charge-Id"))
		assert.True(t, again.replayed())
	}
	assert.EqualValues(t, 1, h.calls.Load())
}

// TestErrorsAreReplayed: a 5xx is the request's result too, stored and
// replayed by default; with WithStoreStatus excluding it, the key is
// released and a retry runs the handler again.
func TestErrorsAreReplayed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []idempotency.Option
		calls int64
	}{
		{"stored by default", nil, 1},
		{"released when not stored", []idempotency.Option{idempotency.WithStoreStatus(func(s int) bool { return s < 500 })}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := redistest.Redis(t)
			var calls atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				http.Error(w, fmt.Sprint("ledger unavailable ", n), http.StatusBadGateway)
			})
			reps := replicasOn(t, srv, 2, h, nil, tc.opts...)
			c := client(t)
			rq := req{tenant: "acme", key: key, body: `{}`}
			a := mustPost(t, c, reps[0].URL, rq)
			b := mustPost(t, c, reps[1].URL, rq)
			assert.Equal(t, http.StatusBadGateway, a.status)
			assert.Equal(t, http.StatusBadGateway, b.status)
			assert.Equal(t, tc.calls, calls.Load())
			assert.Equal(t, tc.calls == 1, a.body == b.body, "%q, %q", a.body, b.body)
			assert.Equal(t, tc.calls == 1, b.replayed())
		})
	}
}

// TestDifferentPayloadIs422EvenWhileProcessing: the key reused with another
// body gets 422 while the first request runs (422 wins over 409), and after
// it finished; the same payload gets 409, then the replay. The handler runs
// once.
func TestDifferentPayloadIs422EvenWhileProcessing(t *testing.T) {
	_, srv := redistest.Redis(t)
	started, release := make(chan struct{}), make(chan struct{})
	h := &charge{hold: func() { close(started); <-release }}
	reps := replicasOn(t, srv, 2, h, nil)
	c := client(t)
	rq := req{tenant: "acme", key: key, body: `{"amount":100}`}
	other := rq
	other.body = `{"amount":900}`

	first := make(chan result, 1)
	go func() { first <- mustPost(t, c, reps[0].URL, rq) }()
	<-started
	while := mustPost(t, c, reps[1].URL, other)
	assert.Equal(t, http.StatusUnprocessableEntity, while.status)
	assert.Equal(t, idempotency.ProblemMismatch, problemType(t, while))
	same := mustPost(t, c, reps[1].URL, rq)
	assert.Equal(t, http.StatusConflict, same.status)
	close(release)
	assert.Equal(t, http.StatusCreated, (<-first).status)

	after := mustPost(t, c, reps[1].URL, other)
	assert.Equal(t, http.StatusUnprocessableEntity, after.status)
	for _, hdr := range []http.Header{{"Content-Type": {"text/plain"}}} {
		r := rq
		r.hdr = hdr
		assert.Equal(t, http.StatusUnprocessableEntity, mustPost(t, c, reps[0].URL, r).status, "header %v is in the fingerprint", hdr)
	}
	assert.EqualValues(t, 1, h.calls.Load())
}

// TestScopesAreApart: another tenant sending the same key runs the
// handler and gets its own answer.
func TestScopesAreApart(t *testing.T) {
	_, srv := redistest.Redis(t)
	h := &charge{}
	reps := replicasOn(t, srv, 2, h, nil)
	c := client(t)
	a := mustPost(t, c, reps[0].URL, req{tenant: "acme", key: key, body: `{"amount":100}`})
	b := mustPost(t, c, reps[1].URL, req{tenant: "globex", key: key, body: `{"amount":100}`})
	assert.Equal(t, http.StatusCreated, b.status)
	assert.False(t, b.replayed())
	assert.NotEqual(t, a.body, b.body)
	assert.EqualValues(t, 2, h.calls.Load())
}
