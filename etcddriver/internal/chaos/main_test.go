package chaos_test

import (
	"testing"

	"github.com/redfence/redfence/internal/testutil"
)

// testutil.Main drops the package's PostgreSQL database, then runs goleak.
func TestMain(m *testing.M) { testutil.Main(m) }
