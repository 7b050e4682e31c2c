package lockdebug_test

import (
	"testing"

	"github.com/redfence/redfence/internal/testutil"
)

// The tests start their own servers; ExampleHandler finds its in the
// environment, as a reader's program would. goleak runs after them.
func TestMain(m *testing.M) {
	testutil.MainWithEnv(m, []string{testutil.EnvRedisAddr})
}
