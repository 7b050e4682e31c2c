package lockdebugtest

import (
	"testing"

	"github.com/redfence/redfence/internal/redistest"
)

// The tests start their own servers; ExampleHandler finds its in the
// environment, as a reader's program would. goleak runs after them.
func TestMain(m *testing.M) {
	redistest.MainWithEnv(m, []string{redistest.EnvRedisAddr})
}
