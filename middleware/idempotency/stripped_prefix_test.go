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

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/middleware/idempotency"
)

// TestRouteKeepsStrippedPrefix: a record is keyed by the route, so
// that one key sent to two endpoints makes two records. Behind
// http.StripPrefix, POST /billing/orders and POST /shipping/orders are
// both "POST /orders" to the inner mux; the default route keeps the
// stripped prefix, so a key a client derives from an order id, sent to
// both, runs shipping's handler rather than replaying billing's response.
func TestRouteKeepsStrippedPrefix(t *testing.T) {
	billing, shipping := strippedPair(t)
	require.Equal(t, "billing order created", billing.body)
	assert.False(t, shipping.replayed(), "another endpoint's stored response was replayed: %q", shipping.body)
	assert.Equal(t, "shipping order created", shipping.body)
}

// TestFingerprintKeepsStrippedPrefix: with one route for both (WithRoute),
// the fingerprint's path is still the one the client sent: the key reused
// on the other endpoint is 422, not billing's replay.
func TestFingerprintKeepsStrippedPrefix(t *testing.T) {
	billing, shipping := strippedPair(t, idempotency.WithRoute(func(*http.Request) string { return "orders" }))
	require.Equal(t, "billing order created", billing.body)
	assert.Equal(t, http.StatusUnprocessableEntity, shipping.status, "%q", shipping.body)
}

// strippedPair sends one key to POST /billing/orders, then to POST
// /shipping/orders, two services behind http.StripPrefix.
func strippedPair(t *testing.T, opts ...idempotency.Option) (billing, shipping result) {
	_, srv := testutil.Redis(t)
	l := testutil.Locker(t, srv.Client())
	mw, err := idempotency.New(l, tenant, opts...)
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
	return send("/billing/orders"), send("/shipping/orders")
}
