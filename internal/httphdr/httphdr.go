// Package httphdr holds the header rules the HTTP middlewares (httplock,
// idempotency) share: which headers describe one connection, the canonical
// form a stored response's headers are compared in, and what a header name
// may be.
package httphdr

import (
	"maps"
	"net/http"
	"slices"
	"strings"
)

// hopByHop are the headers that describe one connection, never a response
// (RFC 9110 §7.6.1).
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// IsHopByHop reports whether the canonical name is one of the fixed
// hop-by-hop headers (not those a Connection field names).
func IsHopByHop(name string) bool { return slices.Contains(hopByHop, name) }

// DropHopByHop deletes from h the hop-by-hop headers and those its
// Connection field names.
func DropHopByHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			if name = strings.TrimSpace(name); name != "" {
				h.Del(name)
			}
		}
	}
	for _, name := range hopByHop {
		h.Del(name)
	}
}

// Canonical returns a copy of h with every name in canonical form, the
// values of names that differ only in case merged (in the order of the
// names, so that the result does not depend on map order).
func Canonical(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for _, k := range slices.Sorted(maps.Keys(h)) {
		ck := http.CanonicalHeaderKey(k)
		out[ck] = append(out[ck], h[k]...)
	}
	return out
}

// ValidName reports whether name is an RFC 9110 token, the grammar of a
// field name: what httpguts.ValidHeaderFieldName checks, without x/net.
func ValidName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if !IsTchar(name[i]) {
			return false
		}
	}
	return true
}

// IsTchar reports whether c may appear in an RFC 9110 token.
func IsTchar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
