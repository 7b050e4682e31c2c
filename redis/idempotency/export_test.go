package idempotency

import "net/http"

// WaitCalls waits for the Redis commands the requests of a handler New's
// middleware made stopped waiting for (a hung server, a client without
// ContextTimeoutEnabled): tests end with no goroutine left.
func WaitCalls(h http.Handler) { h.(*handler).calls.Wait() }

// RecordKey is the Redis key of the record of a handler New's middleware
// made, for scope and key.
func RecordKey(h http.Handler, scope, key string) string {
	return h.(*handler).recordKey(recordID(scope, key))
}
