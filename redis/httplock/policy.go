package httplock

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What may be shared: the rules a captured response must pass, on top of the
// request's eligibility (key.go).

// notShareable returns why a captured response may not be shared, or "";
// h must be canonical (see canonical). A 206, 304 or 412 answers one
// request's range or condition (eligible requests carry none, but an origin
// may answer so anyway), and a 1xx is not a final answer: whatever
// shareStatus says, they are the leader's own. So is a response that says
// it must not be reused without revalidation, or is stale already.
func notShareable(status int, h http.Header, shareStatus func(int) bool) string {
	switch {
	case !storable(status), !shareStatus(status):
		return "status"
	case len(h["Set-Cookie"]) > 0, len(h["Set-Cookie2"]) > 0:
		return "set-cookie"
	case len(h["Trailer"]) > 0:
		return "trailers"
	case hasDirective(h["Pragma"], "no-cache"):
		return "cache-control"
	}
	for k := range h {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			return "trailers"
		}
	}
	for _, d := range directives(h["Cache-Control"]) {
		switch d.name {
		case "no-store", "private":
			return "cache-control"
		case "no-cache":
			if !d.hasValue { // qualified, it names fields, not the response
				return "cache-control"
			}
		case "max-age", "s-maxage":
			if d.seconds() <= 0 {
				return "cache-control"
			}
		}
	}
	if vs := h["Expires"]; len(vs) > 0 {
		t, err := http.ParseTime(vs[0])
		if err != nil || !t.After(time.Now()) { // an invalid date means expired (RFC 9111 §5.3)
			return "expires"
		}
	}
	for _, v := range h["Vary"] {
		for _, f := range strings.Split(v, ",") {
			if strings.TrimSpace(f) == "*" {
				return "vary"
			}
		}
	}
	return ""
}

// shareFor returns how long a response with the (canonical) headers h may
// be shared: window, or less when its Cache-Control gives it a shorter
// freshness lifetime (s-maxage, which is for shared caches, before
// max-age).
func shareFor(h http.Header, window time.Duration) time.Duration {
	var maxAge, sMaxAge time.Duration = -1, -1
	for _, d := range directives(h["Cache-Control"]) {
		switch d.name {
		case "max-age":
			maxAge = d.seconds()
		case "s-maxage":
			sMaxAge = d.seconds()
		}
	}
	switch {
	case sMaxAge >= 0:
		return min(window, sMaxAge)
	case maxAge >= 0:
		return min(window, maxAge)
	}
	return window
}

// contentLengthMatches reports whether the (canonical) headers h declare no
// Content-Length, or one that parses and is n.
func contentLengthMatches(h http.Header, n int) bool {
	vs := h["Content-Length"]
	if len(vs) == 0 {
		return true
	}
	if len(vs) > 1 {
		return false
	}
	cl, err := strconv.ParseInt(strings.TrimSpace(vs[0]), 10, 64)
	return err == nil && cl == int64(n)
}

// bodyAllowed reports whether a response with status to a method carries a
// body (RFC 9110 §6.4.1): not to HEAD, and not with a 1xx, 204 or 304.
func bodyAllowed(method string, status int) bool {
	return method != http.MethodHead && status >= 200 &&
		status != http.StatusNoContent && status != http.StatusNotModified
}

// directive is one Cache-Control or Pragma directive; names are lower case.
type directive struct {
	name     string
	value    string
	hasValue bool
}

// seconds returns a delta-seconds value (RFC 9111 §1.2.2). One that is not
// a number is 0, a lifetime that has ended (the safe reading); one too large
// for a Duration is the largest.
func (d directive) seconds() time.Duration {
	v := strings.Trim(d.value, `"`)
	if v == "" || strings.Trim(v, "0123456789") != "" {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n > int64(math.MaxInt64/time.Second) {
		return math.MaxInt64
	}
	return time.Duration(n) * time.Second
}

// directives parses Cache-Control (or Pragma) field values.
func directives(values []string) []directive {
	var out []directive
	for _, v := range values {
		for _, item := range strings.Split(v, ",") {
			name, value, ok := strings.Cut(strings.TrimSpace(item), "=")
			name = strings.ToLower(strings.TrimSpace(name))
			if name == "" {
				continue
			}
			out = append(out, directive{name: name, value: strings.TrimSpace(value), hasValue: ok})
		}
	}
	return out
}

// hasDirective reports whether the field values have the directive name,
// with or without a value.
func hasDirective(values []string, name string) bool {
	for _, d := range directives(values) {
		if d.name == name {
			return true
		}
	}
	return false
}

// varyDigest is what an entry keeps of a request's values for a header its
// response varies on: a SHA-256, so that a credential varied on (a bearer
// token) is not stored in Redis.
func varyDigest(values []string) string {
	sum := sha256.Sum256([]byte(strings.Join(values, ", ")))
	return hex.EncodeToString(sum[:])
}
