// Package processes_test holds the election's test with real processes:
// five candidate processes (this test binary again) under SIGSTOP and
// SIGKILL, their beliefs and fenced writes judged by internal/leadercheck.
// It is a package of its own so that its child mode and its TestMain stay
// apart from the election package's tests.
package processes

import (
	"testing"

	"github.com/redfence/redfence/internal/redistest"
)

func TestMain(m *testing.M) { redistest.Main(m) }
