package testutil

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests, then tears down what outlives single tests
// (the package's PostgreSQL and MySQL databases), then, when the tests
// passed, fails the run if any goroutine is left (goleak). Call it from
// TestMain:
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
func Main(m *testing.M, opts ...goleak.Option) {
	Run(m, nil, opts...)
}

// EnvDatabaseURL is the variable MainWithEnv sets to the package's
// PostgreSQL database, for Example functions: they get no *testing.T and
// find their servers in the environment, as a reader's program would.
const EnvDatabaseURL = "DATABASE_URL"

// MainWithEnv is Main that first sets EnvDatabaseURL, when vars names it,
// to a database private to the package's test binary, dropped after the
// tests.
func MainWithEnv(m *testing.M, vars []string, opts ...goleak.Option) {
	Run(m, func() (func(), error) {
		for _, name := range vars {
			if name != EnvDatabaseURL {
				return nil, fmt.Errorf("%s: not a variable MainWithEnv knows", name)
			}
			if err := SetDatabaseURL(); err != nil {
				return nil, err
			}
		}
		return func() {}, nil
	}, opts...)
}

// SetDatabaseURL sets EnvDatabaseURL to the package's database.
func SetDatabaseURL() error {
	pkgDB.once.Do(setupPostgres)
	if pkgDB.err != nil {
		return pkgDB.err
	}
	return os.Setenv(EnvDatabaseURL, pkgDB.url)
}

// Run is Main around setup: setup runs before the tests (an error fails the
// binary without running them) and the teardown it returns runs after
// them, before the databases are dropped and goleak looks. Other modules'
// test helpers build their Main on it.
func Run(m *testing.M, setup func() (teardown func(), err error), opts ...goleak.Option) {
	mainRunning = true
	code := 0
	teardown := func() {}
	if setup != nil {
		td, err := setup()
		if td != nil {
			teardown = td
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
			code = 1
		}
	}
	if code == 0 {
		code = m.Run()
	}
	teardown()
	teardownPostgres()
	teardownMySQL()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
