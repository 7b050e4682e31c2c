package httplock

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
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
