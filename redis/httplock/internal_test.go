package httplock

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

func TestAcceptsEncoding(t *testing.T) {
	for _, tc := range []struct {
		accept  []string // nil: no Accept-Encoding field
		codings []string
		want    bool
	}{
		{nil, nil, true},
		{nil, []string{"identity"}, true},
		{nil, []string{"gzip"}, false}, // no field accepts only the identity (our choice, not RFC 9110's)
		{[]string{""}, []string{"gzip"}, false},
		{[]string{"gzip"}, []string{"gzip"}, true},
		{[]string{"GZIP"}, []string{"gzip"}, true},
		{[]string{"x-gzip"}, []string{"gzip"}, true},
		{[]string{"gzip"}, []string{"x-gzip"}, true},
		{[]string{"br"}, []string{"gzip"}, false},
		{[]string{"br", "gzip"}, []string{"gzip"}, true},
		{[]string{"gzip;q=0"}, []string{"gzip"}, false},
		{[]string{"gzip; q=0.000"}, []string{"gzip"}, false},
		{[]string{"gzip;Q=0.1"}, []string{"gzip"}, true},
		{[]string{"gzip;q=abc"}, []string{"gzip"}, false},
		{[]string{"gzip;q=2"}, []string{"gzip"}, false},
		{[]string{"*"}, []string{"gzip"}, true},
		{[]string{"*;q=0"}, []string{"gzip"}, false},
		{[]string{"gzip;q=0, *"}, []string{"gzip"}, false}, // named settles it
		{[]string{"*;q=0, gzip"}, []string{"gzip"}, true},
		{[]string{"gzip"}, []string{"gzip, br"}, false}, // every coding applied must be accepted
		{[]string{"gzip, br"}, []string{"gzip", "br"}, true},
		{[]string{"identity;q=0"}, []string{"identity"}, true}, // identity is always what a response without coding is
	} {
		assert.Equal(t, tc.want, acceptsEncoding(tc.accept, tc.codings), "Accept-Encoding %q, Content-Encoding %q", tc.accept, tc.codings)
	}
}

// TestKeyFieldsDoNotRunTogether: two requests that spread the same bytes
// over different headers, or differ only in TLS, have different keys.
func TestKeyFieldsDoNotRunTogether(t *testing.T) {
	h := &handler{cfg: newConfig([]Option{WithVary("X-A", "X-B")})}
	r1 := httptest.NewRequest(http.MethodGet, "/", nil)
	r1.Header.Set("X-A", "X-B")
	r2 := httptest.NewRequest(http.MethodGet, "/", nil)
	r2.Header.Set("X-B", "X-B")
	assert.NotEqual(t, h.key(r1), h.key(r2))

	r3 := httptest.NewRequest(http.MethodGet, "/", nil)
	r4 := httptest.NewRequest(http.MethodGet, "/", nil)
	r4.TLS = &tls.ConnectionState{}
	assert.NotEqual(t, h.key(r3), h.key(r4), "TLS or not")

	r5 := httptest.NewRequest(http.MethodGet, "/", nil)
	assert.Equal(t, h.key(r3), h.key(r5), "identical requests, one key")
}

// TestIneligible: every request input that makes a request its sender's
// own, or not the request its key says, bypasses, with its reason.
func TestIneligible(t *testing.T) {
	h := &handler{cfg: newConfig(nil)}
	shared := &handler{cfg: newConfig([]Option{WithShareAuthorized(true)})}
	req := func(mod func(r *http.Request)) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		mod(r)
		return r
	}
	header := func(name, value string) func(r *http.Request) {
		return func(r *http.Request) { r.Header.Set(name, value) }
	}
	cases := []struct {
		name string
		r    *http.Request
		want string
	}{
		{"plain", req(func(*http.Request) {}), ""},
		{"HEAD", req(func(r *http.Request) { r.Method = http.MethodHead }), ""},
		{"Content-Length", req(func(r *http.Request) { r.ContentLength = 3 }), "body"},
		{"unknown length", req(func(r *http.Request) { r.ContentLength = -1 }), "body"},
		{"Transfer-Encoding", req(func(r *http.Request) { r.TransferEncoding = []string{"chunked"} }), "body"},
		{"client certificate", req(func(r *http.Request) {
			r.TLS = &tls.ConnectionState{PeerCertificates: []*x509.Certificate{{}}}
		}), "credentials"},
		{"TLS without client certificate", req(func(r *http.Request) { r.TLS = &tls.ConnectionState{} }), ""},
		{"Cache-Control max-age=0", req(header("Cache-Control", "MAX-AGE=0")), "reload"},
		{"Cache-Control max-age=60", req(header("Cache-Control", "max-age=60")), ""},
		{"Cache-Control no-cache", req(header("Cache-Control", "no-cache")), "reload"},
		{"Pragma", req(header("Pragma", "no-cache")), "reload"},
	}
	for _, name := range []string{"X-Api-Key", "X-Auth-Token", "X-Forwarded-Client-Cert", "X-Forwarded-User",
		"X-Forwarded-Email", "X-Auth-Request-User", "X-Auth-Request-Email", "X-Auth-Request-Access-Token",
		"X-Amzn-Oidc-Data", "X-Amzn-Oidc-Identity", "Cf-Access-Jwt-Assertion", "X-Goog-Iap-Jwt-Assertion"} {
		cases = append(cases, struct {
			name string
			r    *http.Request
			want string
		}{name, req(header(name, "x")), "credentials"})
	}
	for _, name := range []string{"X-Original-Url", "X-Rewrite-Url", "X-Http-Method-Override", "X-Http-Method", "X-Method-Override"} {
		cases = append(cases, struct {
			name string
			r    *http.Request
			want string
		}{name, req(header(name, "x")), "override"})
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, h.ineligible(tc.r), tc.name)
		if tc.want == "credentials" {
			assert.Empty(t, shared.ineligible(tc.r), "%s with WithShareAuthorized", tc.name)
		}
	}
}

// TestCorruptEntryIsAMiss: an entry with a status no leader stores reads
// as none, so that it never reaches WriteHeader.
func TestCorruptEntryIsAMiss(t *testing.T) {
	for _, status := range []int{0, 99, 100, 206, 304, 412, 600, 1000} {
		b, err := (&entry{Kind: kindResponse, Status: status}).encode()
		require.NoError(t, err)
		_, err = decode(b)
		assert.ErrorIs(t, err, errCorrupt, "status %d", status)
	}
	b, err := (&entry{Kind: kindResponse, Status: 200, Body: []byte("ok")}).encode()
	require.NoError(t, err)
	e, err := decode(b)
	require.NoError(t, err)
	assert.Equal(t, "ok", string(e.Body))
}

// TestCapturedEntry: what a leader's capture leaves to share, for
// responses whose Content-Length, method or Cache-Control decide it.
func TestCapturedEntry(t *testing.T) {
	unshared := 0 // calls of the capture's unshared, made while the handler ran
	run := func(method string, handle func(w http.ResponseWriter)) (*entry, *httptest.ResponseRecorder) {
		rec := httptest.NewRecorder()
		unshared = 0
		c := newCapture(rec, httptest.NewRequest(method, "/", nil), DefaultMaxBody,
			func(s int, h http.Header) string { return notShareable(s, h, DefaultShareStatus) },
			func() {
				assert.False(t, rec.Flushed || rec.Body.Len() > 0, "unshared comes before anything reaches the client")
				unshared++
			})
		handle(c)
		e := c.entry(DefaultRoleHeader, DefaultShareWindow)
		c.Replay()
		return e, rec
	}
	withLength := func(cl, body string) func(w http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Content-Length", cl)
			_, _ = w.Write([]byte(body))
		}
	}
	for _, tc := range []struct {
		name   string
		method string
		handle func(w http.ResponseWriter)
		shared bool
	}{
		{"Content-Length matches", http.MethodGet, withLength("5", "hello"), true},
		{"Content-Length short", http.MethodGet, withLength("100", "hello"), false},
		{"Content-Length long", http.MethodGet, withLength("2", "hello"), false},
		{"Content-Length invalid", http.MethodGet, withLength("abc", "hello"), false},
		{"Content-Length on HEAD", http.MethodHead, withLength("100", ""), true},
		{"Content-Length twice", http.MethodGet, func(w http.ResponseWriter) {
			w.Header()["Content-Length"] = []string{"5"}
			w.Header()["content-length"] = []string{"6"}
			_, _ = w.Write([]byte("hello"))
		}, false},
	} {
		e, rec := run(tc.method, tc.handle)
		assert.Equal(t, tc.shared, e != nil, tc.name)
		assert.Zero(t, unshared, "%s: decided when the handler returns", tc.name)
		assert.Equal(t, http.StatusOK, rec.Code, "%s: the leader's client gets its response", tc.name)
	}

	e, rec := run(http.MethodHead, func(w http.ResponseWriter) { _, _ = w.Write([]byte("body")) })
	require.NotNil(t, e)
	assert.Empty(t, e.Body, "a HEAD leader stores no body")
	assert.Equal(t, "body", rec.Body.String(), "its own writer is given what the handler wrote")

	e, _ = run(http.MethodGet, func(w http.ResponseWriter) {
		w.Header().Set("Cache-Control", "max-age=1")
		_, _ = w.Write([]byte("x"))
	})
	require.NotNil(t, e)
	assert.Equal(t, time.Second, e.ttl, "kept for its max-age when shorter than the window")

	e, rec = run(http.MethodGet, func(w http.ResponseWriter) {
		w.Header().Set("Cache-Control", "no-store")
		_, _ = w.Write([]byte("a"))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("b"))
	})
	assert.Nil(t, e)
	assert.Equal(t, 1, unshared, "told once, at the first sign")
	assert.Equal(t, "ab", rec.Body.String())
}

// TestFollowersGetTheirOwnBody: a follower's writer that changes the bytes
// it is given changes no one else's response.
func TestFollowersGetTheirOwnBody(t *testing.T) {
	h := &handler{cfg: newConfig(nil), tel: newTelemetry(nil, nil)}
	e := &entry{Kind: kindResponse, Status: http.StatusOK, Body: []byte("page")}
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	h.use(scribbler{httptest.NewRecorder()}, r, e)
	rec := httptest.NewRecorder()
	h.use(rec, r, e)
	assert.Equal(t, "page", rec.Body.String())
}

// scribbler overwrites what it is given once written.
type scribbler struct{ *httptest.ResponseRecorder }

func (s scribbler) Write(p []byte) (int, error) {
	n, err := s.ResponseRecorder.Write(p)
	for i := range p {
		//lint:ignore SA1023 a writer that breaks the rule is what the test is about
		p[i] = 'x'
	}
	return n, err
}

// TestWaitEndsAtTheRequestsDeadline: a request whose wait is over (it spent
// it behind a local flight that aged) does not wait again behind another
// replica's leader. TTL and wait are an hour: only the
// deadline given can end the wait.
func TestWaitEndsAtTheRequestsDeadline(t *testing.T) {
	rdb, _ := redistest.Redis(t)
	locker := redistest.Locker(t, rdb)
	origin := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "origin") })
	h := newHandler(origin, locker, rdb, newConfig([]Option{WithWait(time.Hour), WithTTL(time.Hour)}), newHealth(rdb, time.Second))
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	key := h.key(r)
	lk, err := h.tryLock(context.Background(), key) // another replica's stalled leader
	require.NoError(t, err)
	require.NotNil(t, lk)
	t.Cleanup(func() { _ = lk.Release(context.Background()) })

	done := make(chan string, 1)
	rec := httptest.NewRecorder()
	go func() { done <- h.collapse(rec, r, key, time.Now()) }()
	select {
	case role := <-done:
		assert.Equal(t, RoleBypass, role)
		assert.Equal(t, "origin", rec.Body.String())
	case <-time.After(30 * time.Second):
		t.Fatal("the request waited past its deadline")
	}
}
