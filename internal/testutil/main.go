package testutil

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests, then tears down what outlives single tests
// (the package's PostgreSQL database), then, when the tests passed, fails the
// run if any goroutine is left (goleak). Call it from TestMain:
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
func Main(m *testing.M, opts ...goleak.Option) {
	mainRunning = true
	code := m.Run()
	teardownPostgres()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
