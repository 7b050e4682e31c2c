package idempotency_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/idempotency"
)

// TestGoneRequestIsNotPassedThrough: with PassThrough, a request
// whose context is already done (its client gone, or its budget spent by
// outer middleware) fails its first Redis call with the context's error,
// which is no outage: the handler does not run unprotected while Redis is
// healthy and holds the key's stored response, so a retry of a completed
// payment is not charged again.
func TestGoneRequestIsNotPassedThrough(t *testing.T) {
	gone := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Test-Gone") == "" {
				next.ServeHTTP(w, r)
				return
			}
			ctx, cancel := context.WithCancel(r.Context())
			cancel() // the client went away before the middleware ran
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
	_, srv := redistest.Redis(t)
	h := &charge{}
	rep := replicasOn(t, srv, 1, h, gone, idempotency.WithOnUnavailable(idempotency.PassThrough))[0]
	c := client(t)
	rq := req{tenant: "acme", key: key, body: `{"amount":100}`}
	require.Equal(t, http.StatusCreated, mustPost(t, c, rep.URL, rq).status)
	rq.hdr = http.Header{"X-Test-Gone": {"1"}}
	_ = mustPost(t, c, rep.URL, rq)
	assert.EqualValues(t, 1, h.calls.Load(), "the completed payment ran again, unprotected, with Redis up")
}
