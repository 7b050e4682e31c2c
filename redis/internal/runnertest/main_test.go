package runnertest

import (
	"testing"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/runner"
)

// The Example functions find their servers in the environment, as a
// reader's program would.
func TestMain(m *testing.M) {
	redistest.MainWithEnv(m, []string{redistest.EnvRedisAddr})
}

// newRunner is runner.New for a test that expects it to succeed.
func newRunner(t testing.TB, l *mutex.Locker, opts ...runner.Option) *runner.Runner {
	t.Helper()
	r, err := runner.New(l, opts...)
	if err != nil {
		t.Fatalf("runner.New: %v", err)
	}
	return r
}
