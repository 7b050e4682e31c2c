package bench

import (
	"testing"

	"github.com/redfence/redfence/internal/testutil"
)

// TestMain lets benchmarks use testutil.Postgres (which needs Main to drop
// the package database) and checks that nothing leaks.
func TestMain(m *testing.M) { testutil.Main(m) }
