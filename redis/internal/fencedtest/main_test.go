package fencedtest

import (
	"testing"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
)

// The Example functions find their servers in the environment, as a
// reader's program would.
func TestMain(m *testing.M) {
	redistest.MainWithEnv(m, []string{redistest.EnvRedisAddr, testutil.EnvDatabaseURL})
}
