package httplock

import "net/http"

// WaitProbe waits for the Redis probe of a handler New's middleware made, if
// one is running, and for the commands its requests stopped waiting for:
// tests end with no goroutine left.
func WaitProbe(h http.Handler) {
	h.(*handler).health.probes.Wait()
	h.(*handler).health.calls.Wait()
}

// Probing reports whether the Redis probe of a handler New's middleware
// made is running.
func Probing(h http.Handler) bool {
	s := h.(*handler).health
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.probing
}

// Following is how many requests have joined the local flights of a handler
// New's middleware made that are still in the air.
func Following(h http.Handler) int {
	hh := h.(*handler)
	hh.mu.Lock()
	defer hh.mu.Unlock()
	n := 0
	for _, fl := range hh.flights {
		n += fl.followers
	}
	return n
}
