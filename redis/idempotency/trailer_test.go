package idempotency_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/idempotency"
)

// TestDeclaredTrailerReachesFirstClient: a handler that declares a
// trailer (Trailer: X-Sum) and sets its value after the body, as net/http
// documents for trailers, gets it to the first client, as the bare handler
// does, though the middleware buffers the response.
func TestDeclaredTrailerReachesFirstClient(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		w.Header().Set("Trailer", "X-Sum")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "body")
		w.Header().Set("X-Sum", "abc")
	})
	trailer := func(url string) string {
		c := client(t)
		r, err := http.NewRequest(http.MethodPost, url+"/payments", http.NoBody)
		require.NoError(t, err)
		r.Header.Set(scopeHeader, "acme")
		r.Header.Set(idempotency.HeaderName, key)
		resp, err := c.Do(r)
		require.NoError(t, err)
		defer resp.Body.Close()
		_, _ = io.ReadAll(resp.Body)
		return resp.Trailer.Get("X-Sum")
	}
	bare := httptest.NewServer(h)
	t.Cleanup(bare.Close)
	require.Equal(t, "abc", trailer(bare.URL), "net/http sends it")
	_, srv := redistest.Redis(t)
	rep := replicasOn(t, srv, 1, h, nil)[0]
	assert.Equal(t, "abc", trailer(rep.URL), "the first client gets the handler's trailer")
}
