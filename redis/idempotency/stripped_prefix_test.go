package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/idempotency"
)

// TestKeyReusedOnAnotherEndpointIs422: a key names one operation of one
// client, so one key sent to two endpoints is the same key reused with
// another request. Behind http.StripPrefix, POST /billing/orders and POST
// /shipping/orders are both "POST /orders" to the inner mux, but the
// fingerprint's path is the one the client sent: shipping's request is 422,
// neither billing's replay nor a second run.
func TestKeyReusedOnAnotherEndpointIs422(t *testing.T) {
	billing, shipping := strippedPair(t, "/shipping/orders")
	require.Equal(t, "billing order created", billing.body)
	assert.Equal(t, http.StatusUnprocessableEntity, shipping.status, "%q", shipping.body)
	assert.False(t, shipping.replayed(), "another endpoint's stored response was replayed: %q", shipping.body)
	assert.NotContains(t, shipping.body, "order created")
}

// TestSameEndpointBehindStripPrefixReplays: the same request again, behind
// StripPrefix, is its first response replayed.
func TestSameEndpointBehindStripPrefixReplays(t *testing.T) {
	first, again := strippedPair(t, "/billing/orders")
	require.Equal(t, "billing order created", first.body)
	assert.True(t, again.replayed(), "%d %q", again.status, again.body)
	assert.Equal(t, "billing order created", again.body)
}

// strippedPair sends one key to POST /billing/orders, then to POST second,
// of two services behind http.StripPrefix.
func strippedPair(t *testing.T, second string) (billing, other result) {
	_, srv := redistest.Redis(t)
	l := redistest.Locker(t, srv.Client())
	mw, err := idempotency.New(l, tenant)
	require.NoError(t, err)
	service := func(name string) http.Handler {
		mux := http.NewServeMux()
		mux.Handle("POST /orders", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.ReadAll(r.Body)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, "%s order created", name)
		})))
		return mux
	}
	top := http.NewServeMux()
	top.Handle("/billing/", http.StripPrefix("/billing", service("billing")))
	top.Handle("/shipping/", http.StripPrefix("/shipping", service("shipping")))
	s := httptest.NewServer(top)
	t.Cleanup(s.Close)
	c := client(t)
	send := func(path string) result {
		r, err := http.NewRequest(http.MethodPost, s.URL+path, strings.NewReader(`{"order":1234}`))
		require.NoError(t, err)
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set(scopeHeader, "acme")
		r.Header.Set(idempotency.HeaderName, `"order-1234"`)
		resp, err := c.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return result{status: resp.StatusCode, header: resp.Header, body: string(b)}
	}
	return send("/billing/orders"), send(second)
}
