package mutex_test

import (
	"testing"

	"github.com/redfence/redfence/internal/testutil"
)

// The core's tests over a real store run in the redis module
// (redis/internal/mutextest); this package keeps its Example, over the
// package's PostgreSQL database, which it finds in the environment as a
// reader's program would.
func TestMain(m *testing.M) {
	testutil.MainWithEnv(m, []string{testutil.EnvDatabaseURL})
}
