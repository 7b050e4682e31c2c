package httplock_test

import (
	"testing"

	"github.com/redfence/redfence/internal/testutil"
)

// The Example functions find their servers in the environment, as a
// reader's program would.
func TestMain(m *testing.M) {
	testutil.MainWithEnv(m, []string{testutil.EnvRedisAddr})
}
