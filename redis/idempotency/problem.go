package idempotency

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Problem types (RFC 9457 "type" members), one per refusal, so that a
// client can tell them apart from the handler's own errors. Each is the
// address of its own documentation: this constant on pkg.go.dev.
const (
	ProblemBase        = "https://pkg.go.dev/github.com/redfence/redfence/redis/idempotency#"
	ProblemKeyMissing  = ProblemBase + "ProblemKeyMissing"  // 400: the route requires an Idempotency-Key
	ProblemKeyInvalid  = ProblemBase + "ProblemKeyInvalid"  // 400: not 1-255 visible ASCII characters, bare or an RFC 8941 String
	ProblemBody        = ProblemBase + "ProblemBody"        // 400: the request body could not be read
	ProblemNoScope     = ProblemBase + "ProblemNoScope"     // 403: the scope function found no principal
	ProblemTooLarge    = ProblemBase + "ProblemTooLarge"    // 413: the body is past WithMaxRequestBody
	ProblemMismatch    = ProblemBase + "ProblemMismatch"    // 422: the key was used with another request
	ProblemInProgress  = ProblemBase + "ProblemInProgress"  // 409: a request with the key runs; Retry-After
	ProblemNotStored   = ProblemBase + "ProblemNotStored"   // 409: processed, but its response was not stored
	ProblemUnavailable = ProblemBase + "ProblemUnavailable" // 503: Redis failed before the handler; Retry-After
)

type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
}

// writeProblem answers with an RFC 9457 problem. retryAfter, when not
// zero, is sent as Retry-After in seconds.
func writeProblem(w http.ResponseWriter, status int, typ, detail string, retryAfter int) {
	b, _ := json.Marshal(problem{Type: typ, Title: http.StatusText(status), Status: status, Detail: detail})
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(retryAfter))
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
