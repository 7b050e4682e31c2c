package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/idempotency"
)

// TestKeyFormat: the key is 1 to 255 visible ASCII characters, bare (a
// UUID, as client SDKs send it) or as an RFC 8941 String; anything else,
// or none where the key is required, is answered 400 problem+json before
// the handler, and leaves nothing in Redis.
func TestKeyFormat(t *testing.T) {
	rdb, srv := redistest.Redis(t)
	h := &charge{}
	strict := replicasOn(t, srv, 1, h, nil)[0]
	short := replicasOn(t, srv, 1, h, nil, idempotency.WithMaxKeyLen(8))[0]
	c := client(t)
	long := strings.Repeat("k", 255)
	for _, tc := range []struct {
		name   string
		rep    replica
		hdr    []string // Idempotency-Key fields
		status int
		typ    string
	}{
		{"string", strict, []string{`"abc-123"`}, http.StatusCreated, ""},
		{"255 characters", strict, []string{`"` + long + `"`}, http.StatusCreated, ""},
		{"escapes", strict, []string{`"a\"b\\c"`}, http.StatusCreated, ""},
		{"spaces around", strict, []string{` "sp" `}, http.StatusCreated, ""},
		{"bare UUID", strict, []string{`8e03978e-40d5-43e8-bc93-6894a57f9324`}, http.StatusCreated, ""},
		{"bare, a digit first", strict, []string{`1abc`}, http.StatusCreated, ""},
		{"bare, a quote inside", strict, []string{`ab"c`}, http.StatusCreated, ""},
		{"missing", strict, nil, http.StatusBadRequest, idempotency.ProblemKeyMissing},
		{"256 characters", strict, []string{`"` + long + `k"`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"256 bare characters", strict, []string{long + `k`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"empty string", strict, []string{`""`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"empty field", strict, []string{``}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"two fields", strict, []string{`"a"`, `"b"`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"list", strict, []string{`"a", "b"`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"bare with a space", strict, []string{`a b`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"parameters", strict, []string{`"a";v=1`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"no closing quote", strict, []string{`"abc`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"bad escape", strict, []string{`"a\nb"`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"not ASCII", strict, []string{`"clé"`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"bare, not ASCII", strict, []string{`clé`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"past WithMaxKeyLen", short, []string{`"123456789"`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"bare, past WithMaxKeyLen", short, []string{`123456789`}, http.StatusBadRequest, idempotency.ProblemKeyInvalid},
		{"at WithMaxKeyLen", short, []string{`12345678`}, http.StatusCreated, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := h.calls.Load()
			res := mustPost(t, c, tc.rep.URL, req{tenant: "acme", body: "{}", hdr: http.Header{idempotency.HeaderName: tc.hdr}})
			assert.Equal(t, tc.status, res.status, res.body)
			if tc.typ != "" {
				assert.Equal(t, tc.typ, problemType(t, res))
				assert.Equal(t, before, h.calls.Load(), "the handler did not run")
			}
		})
	}
	keys, err := rdb.Keys(t.Context(), idempotency.DefaultPrefix+"*").Result()
	require.NoError(t, err)
	assert.Len(t, keys, 8, "one record per accepted key, none for a refused one")
}

// TestNotCovered: other methods, and requests without a key where it is
// optional, go to the handler untouched, every time.
func TestNotCovered(t *testing.T) {
	_, srv := redistest.Redis(t)
	h := &charge{}
	opt := replicasOn(t, srv, 1, h, nil, idempotency.WithKeyOptional(true))[0]
	c := client(t)
	for range 2 {
		assert.Equal(t, http.StatusCreated, mustPost(t, c, opt.URL, req{tenant: "acme", body: "{}"}).status)
		r, err := http.NewRequest(http.MethodPut, opt.URL+"/payments", strings.NewReader("{}"))
		require.NoError(t, err)
		r.Header.Set(idempotency.HeaderName, key)
		resp, err := c.Do(r)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusCreated, resp.StatusCode)
	}
	assert.EqualValues(t, 4, h.calls.Load())
}

// TestRequestBody: the body is read for the fingerprint up to
// WithMaxRequestBody, and the handler gets it whole; a larger one is 413
// before the handler. Without the body in the fingerprint it is not read,
// whatever its size, and another body with the key is a replay, not 422.
func TestRequestBody(t *testing.T) {
	_, srv := redistest.Redis(t)
	h := &charge{}
	bounded := replicasOn(t, srv, 1, h, nil, idempotency.WithMaxRequestBody(16))[0]
	unread := replicasOn(t, srv, 1, h, nil, idempotency.WithMaxRequestBody(16), idempotency.WithFingerprintBody(false))[0]
	c := client(t)
	ok := mustPost(t, c, bounded.URL, req{tenant: "acme", key: `"a"`, body: `{"n":1234567890}`})
	assert.Equal(t, `{"charge":1,"request":{"n":1234567890}}`, ok.body, "16 bytes, given whole to the handler")
	big := mustPost(t, c, bounded.URL, req{tenant: "acme", key: `"b"`, body: `{"n":12345678901}`})
	assert.Equal(t, http.StatusRequestEntityTooLarge, big.status)
	assert.Equal(t, idempotency.ProblemTooLarge, problemType(t, big))
	assert.EqualValues(t, 1, h.calls.Load())

	first := mustPost(t, c, unread.URL, req{tenant: "acme", key: `"c"`, body: `{"n":12345678901}`})
	other := mustPost(t, c, unread.URL, req{tenant: "acme", key: `"c"`, body: `{"n":2}`})
	assert.Equal(t, http.StatusCreated, first.status)
	assert.Equal(t, first.body, other.body)
	assert.True(t, other.replayed())
}

// TestUnstoredResponses: a response past WithMaxBody, or streamed, reaches
// its own client whole; it is not stored, and retries are refused with 409
// (ProblemNotStored) rather than running the handler again.
func TestUnstoredResponses(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter)
	}{
		{"oversize", func(w http.ResponseWriter) { fmt.Fprint(w, strings.Repeat("x", 100)) }},
		{"streamed", func(w http.ResponseWriter) {
			fmt.Fprint(w, strings.Repeat("x", 50))
			w.(http.Flusher).Flush()
			fmt.Fprint(w, strings.Repeat("x", 50))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, srv := redistest.Redis(t)
			var calls atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { calls.Add(1); tc.write(w) })
			reps := replicasOn(t, srv, 2, h, nil, idempotency.WithMaxBody(64))
			c := client(t)
			rq := req{tenant: "acme", key: key, body: "{}"}
			first := mustPost(t, c, reps[0].URL, rq)
			assert.Equal(t, strings.Repeat("x", 100), first.body)
			again := mustPost(t, c, reps[1].URL, rq)
			assert.Equal(t, http.StatusConflict, again.status)
			assert.Equal(t, idempotency.ProblemNotStored, problemType(t, again))
			assert.Empty(t, again.header.Get("Retry-After"), "retrying will not help")
			assert.EqualValues(t, 1, calls.Load())
		})
	}
}

// TestPanickingHandler: a handler that panics stores nothing and releases
// its key at once: a retry runs the handler (not 409 until the lease ends).
func TestPanickingHandler(t *testing.T) {
	_, srv := redistest.Redis(t)
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		w.WriteHeader(http.StatusCreated)
	})
	rep := replicasOn(t, srv, 1, h, nil, idempotency.WithTTL(idempotency.DefaultTTL))[0]
	c := client(t)
	rq := req{tenant: "acme", key: key, body: "{}"}
	assert.Error(t, post(t.Context(), c, rep.URL, rq).err, "net/http aborts the connection")
	assert.Equal(t, http.StatusCreated, mustPost(t, c, rep.URL, rq).status)
	assert.EqualValues(t, 2, calls.Load())
}

// TestKeyReusedWithAnotherMethodIs422: a key names one operation of one
// client. POST /items/1 then PATCH /items/1 with the same key and body is
// the key reused: 422 while the POST runs and after it finished, and the
// handler runs once.
func TestKeyReusedWithAnotherMethodIs422(t *testing.T) {
	_, srv := redistest.Redis(t)
	started, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			close(started)
			<-release
		}
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "%s done", r.Method)
	})
	rep := replicasOn(t, srv, 1, h, nil)[0]
	c := client(t)
	send := func(method string) result {
		r, err := http.NewRequest(method, rep.URL+"/items/1", strings.NewReader("{}"))
		require.NoError(t, err)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(scopeHeader, "acme")
		r.Header.Set(idempotency.HeaderName, "8e03978e-40d5-43e8-bc93-6894a57f9324")
		resp, err := c.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}
	first := make(chan result, 1)
	go func() { first <- send(http.MethodPost) }()
	<-started
	while := send(http.MethodPatch)
	assert.Equal(t, http.StatusUnprocessableEntity, while.status, "while the POST runs: %s", while.body)
	assert.Equal(t, idempotency.ProblemMismatch, problemType(t, while))
	close(release)
	res := <-first
	require.Equal(t, http.StatusCreated, res.status)
	assert.Equal(t, "POST done", res.body)
	after := send(http.MethodPatch)
	assert.Equal(t, http.StatusUnprocessableEntity, after.status, "after the POST: %s", after.body)
	assert.True(t, send(http.MethodPost).replayed(), "the POST again is replayed")
	assert.EqualValues(t, 1, calls.Load(), "the handler ran once")
}
