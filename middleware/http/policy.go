package httplock

import (
	"net/http"
	"strings"
)

// What may be shared: the rules a captured response must pass, on top of the
// request's eligibility (key.go).

// hopByHop are the headers that describe one connection, never a response
// (RFC 9110 §7.6.1).
var hopByHop = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

func dropHopByHop(h http.Header) {
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

// notShareable returns why a captured response may not be shared, or "".
// A 206, 304 or 412 answers one request's range or condition (eligible
// requests carry none, but an origin may answer so anyway), and a 1xx is not
// a final answer: whatever shareStatus says, they are the leader's own.
func notShareable(status int, h http.Header, shareStatus func(int) bool) string {
	switch {
	case status < 200, status == http.StatusPartialContent, status == http.StatusNotModified,
		status == http.StatusPreconditionFailed:
		return "status"
	case !shareStatus(status):
		return "status"
	case len(h.Values("Set-Cookie")) > 0:
		return "set-cookie"
	case len(h.Values("Trailer")) > 0:
		return "trailers"
	}
	for _, v := range h.Values("Cache-Control") {
		for _, d := range strings.Split(v, ",") {
			d = strings.ToLower(strings.TrimSpace(d))
			if name, _, _ := strings.Cut(d, "="); name == "no-store" || name == "private" {
				return "cache-control"
			}
		}
	}
	for _, v := range h.Values("Vary") {
		for _, f := range strings.Split(v, ",") {
			if strings.TrimSpace(f) == "*" {
				return "vary"
			}
		}
	}
	return ""
}
