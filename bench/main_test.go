package bench

import (
	"testing"

	"github.com/redfence/redfence/internal/redistest"
)

// TestMain lets benchmarks use testutil.Postgres (which needs Main to drop
// the package database) and checks that nothing leaks.
func TestMain(m *testing.M) { redistest.Main(m) }
