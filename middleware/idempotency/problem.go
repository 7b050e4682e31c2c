package idempotency

import (
	"encoding/json"
	"net/http"
	"strconv"
)

// Problem types (RFC 9457 "type" members), one per refusal, under one
// base so that a client can tell them apart from the handler's own errors.
// They are identifiers; nothing is served there.
const (
	ProblemBase        = "https://github.com/redfence/redfence/blob/main/middleware/idempotency/README.md#"
	ProblemKeyMissing  = ProblemBase + "key-missing"         // 400
	ProblemKeyInvalid  = ProblemBase + "key-invalid"         // 400
	ProblemNoScope     = ProblemBase + "no-scope"            // 403
	ProblemTooLarge    = ProblemBase + "body-too-large"      // 413
	ProblemMismatch    = ProblemBase + "key-reused"          // 422
	ProblemInProgress  = ProblemBase + "in-progress"         // 409
	ProblemNotStored   = ProblemBase + "response-not-stored" // 409
	ProblemUnavailable = ProblemBase + "unavailable"         // 503
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
