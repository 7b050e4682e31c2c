package bench

import (
	"testing"

	"github.com/redfence/redfence/internal/testutil"
)

// TestMain checks that nothing the benchmarks start outlives them.
func TestMain(m *testing.M) { testutil.Main(m) }
