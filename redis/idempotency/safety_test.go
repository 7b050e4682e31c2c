package idempotency_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/idempotency"
)

// The tests in this file follow the ways a stored response could reach a
// client it was not meant for, as httplock's safety tests do for shared
// responses: another scope, a header about one client (a cookie, the
// connection), a header another middleware set.

// TestNoReplayAcrossScopes: a key guessed or reused by another tenant runs
// that tenant's request, with no hint the key exists elsewhere (no 409
// while the first runs, no 422 for another body). Scope and key are
// hashed apart: the tenant "acme" is not "acmePOST", "acm" or "Acme", and a
// request with no scope is refused.
func TestNoReplayAcrossScopes(t *testing.T) {
	_, srv := redistest.Redis(t)
	started, release := make(chan struct{}), make(chan struct{})
	var n atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		if i == 1 {
			close(started)
			<-release
		}
		fmt.Fprintf(w, "secret of %s, call %d", tenant(r), i)
	})
	reps := replicasOn(t, srv, 2, h, nil)
	c := client(t)
	at := func(tenant, body string) req { return req{tenant: tenant, key: key, body: body} }
	first := make(chan result, 1)
	go func() { first <- mustPost(t, c, reps[0].URL, at("acme", "{}")) }()
	<-started
	while := mustPost(t, c, reps[1].URL, at("acmePOST", `{"other":1}`))
	assert.Equal(t, http.StatusOK, while.status, "not 409 nor 422: %s", while.body)
	assert.Equal(t, "secret of acmePOST, call 2", while.body)
	close(release)
	assert.Equal(t, "secret of acme, call 1", (<-first).body)

	for _, tenant := range []string{"acmePOST", "acm", "acme2", "Acme"} {
		res := mustPost(t, c, reps[1].URL, at(tenant, "{}"))
		assert.NotContains(t, res.body, "call 1", "tenant %q", tenant)
	}
	none := mustPost(t, c, reps[0].URL, req{key: key, body: "{}"})
	assert.Equal(t, http.StatusForbidden, none.status)
	assert.Equal(t, idempotency.ProblemNoScope, problemType(t, none))
}

// TestCookiesAndHopByHopNotReplayed: a session cookie the handler sets is
// the first client's; so are the headers about its connection. Neither is
// stored nor replayed, unless WithReplayHeaders names them.
func TestCookiesAndHopByHopNotReplayed(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Set-Cookie", "session=s3cr3t")
		w.Header().Set("Set-Cookie2", "old=s3cr3t")
		w.Header().Set("Connection", "X-Conn-Secret")
		w.Header().Set("X-Conn-Secret", "s3cr3t")
		w.Header().Set("Proxy-Authenticate", "Basic realm=s3cr3t")
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("X-Charge-Id", "ch_1")
		w.WriteHeader(http.StatusCreated)
	})
	for _, tc := range []struct {
		name     string
		opts     []idempotency.Option
		replayed []string
	}{
		{"default", nil, nil},
		{"cookies replayed when named", []idempotency.Option{idempotency.WithReplayHeaders("set-cookie")}, []string{"Set-Cookie"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rdb, srv := redistest.Redis(t)
			reps := replicasOn(t, srv, 2, h, nil, tc.opts...)
			c := client(t)
			rq := req{tenant: "acme", key: key, body: "{}"}
			first := mustPost(t, c, reps[0].URL, rq)
			assert.Equal(t, "session=s3cr3t", first.header.Get("Set-Cookie"), "the first client gets its cookie")
			again := mustPost(t, c, reps[1].URL, rq)
			require.True(t, again.replayed())
			assert.Equal(t, "ch_1", again.header.Get("X-Charge-Id"))
			for _, name := range []string{"Set-Cookie", "Set-Cookie2", "X-Conn-Secret", "Proxy-Authenticate", "Keep-Alive"} {
				want := ""
				if name == "Set-Cookie" && len(tc.replayed) > 0 {
					want = "session=s3cr3t"
				}
				assert.Equal(t, want, again.header.Get(name), name)
			}
			stored, err := rdb.Get(t.Context(), idempotency.RecordKey(reps[0].handler, "acme", `8e03978e-40d5-43e8-bc93-6894a57f9324`)).Result()
			require.NoError(t, err)
			assert.Equal(t, len(tc.replayed), strings.Count(stored, "s3cr3t"), "nothing else of them is kept in Redis: %q", stored)
		})
	}
}

// TestOuterHeadersNotReplayed: headers set by middleware outside (a request
// id, a session cookie, a CORS header) before the handler ran are that
// request's own: a replay carries the retry's, never the first's.
func TestOuterHeadersNotReplayed(t *testing.T) {
	var ids atomic.Int64
	outer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := ids.Add(1)
			w.Header().Set("X-Request-Id", fmt.Sprint("req-", id))
			w.Header().Add("Set-Cookie", fmt.Sprint("trace=", id))
			if id == 1 {
				w.Header().Set("X-Only-First", "first's")
			}
			next.ServeHTTP(w, r)
		})
	}
	_, srv := redistest.Redis(t)
	h := &charge{}
	reps := replicasOn(t, srv, 2, h, outer, idempotency.WithReplayHeaders("Set-Cookie"))
	c := client(t)
	rq := req{tenant: "acme", key: key, body: "{}"}
	first := mustPost(t, c, reps[0].URL, rq)
	assert.Equal(t, "req-1", first.header.Get("X-Request-Id"))
	again := mustPost(t, c, reps[1].URL, rq)
	require.True(t, again.replayed())
	assert.Equal(t, "req-2", again.header.Get("X-Request-Id"))
	assert.Equal(t, []string{"trace=2"}, again.header.Values("Set-Cookie"))
	assert.Empty(t, again.header.Get("X-Only-First"))
	assert.Equal(t, "ch_1", again.header.Get("X-Charge-Id"), "the handler's own headers are replayed")
}
