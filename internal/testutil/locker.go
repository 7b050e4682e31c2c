package testutil

import (
	"testing"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// WithBackend returns a Locker over b, closed (and so b) when the test
// ends; a construction error fails the test.
func WithBackend(t testing.TB, b backend.Backend, opts ...mutex.Option) *mutex.Locker {
	t.Helper()
	l, err := mutex.New(b, opts...)
	if err != nil {
		t.Fatalf("testutil.WithBackend: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}
