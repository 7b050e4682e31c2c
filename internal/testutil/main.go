package testutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// Main runs a package's tests, then tears down what outlives single tests
// (the package's PostgreSQL and MySQL databases), then, when the tests
// passed, fails the run if any goroutine is left (goleak). Call it from
// TestMain:
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
func Main(m *testing.M, opts ...goleak.Option) {
	run(m, nil, opts)
}

// The variables MainWithEnv sets, for Example functions: they get no
// *testing.T and find their servers in the environment, as a reader's
// program would.
const (
	EnvRedisAddr    = "REDIS_ADDR"    // host:port of a private redis-server
	EnvRedlockAddrs = "REDLOCK_ADDRS" // three more, comma-separated: Redlock masters
	EnvDatabaseURL  = "DATABASE_URL"  // the package's PostgreSQL database
)

// MainWithEnv is Main that first sets each of vars (EnvRedisAddr,
// EnvRedlockAddrs, EnvDatabaseURL) to servers private to the package's test
// binary. The redis-servers stop, and the database is dropped, after the tests.
func MainWithEnv(m *testing.M, vars []string, opts ...goleak.Option) {
	run(m, vars, opts)
}

func run(m *testing.M, vars []string, opts []goleak.Option) {
	mainRunning = true
	// go-redis logs each failed dial; the tests that cause them on purpose
	// would bury real failures under them. Errors still reach the tests.
	redis.SetLogger(quiet{})
	var shared []*RedisServer
	code := 0
	for _, name := range vars {
		if err := setEnv(name, &shared); err != nil {
			fmt.Fprintf(os.Stderr, "testutil: %s: %v\n", name, err)
			code = 1
			break
		}
	}
	if code == 0 {
		code = m.Run()
	}
	for _, s := range shared {
		s.stop()
		_ = os.RemoveAll(s.dir)
	}
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

// setEnv starts the servers behind one of MainWithEnv's variables, appending
// redis-servers to shared for run to stop, and sets the variable.
func setEnv(name string, shared *[]*RedisServer) error {
	n := 0
	switch name {
	case EnvRedisAddr:
		n = 1
	case EnvRedlockAddrs:
		n = 3
	case EnvDatabaseURL:
		pkgDB.once.Do(setupPostgres)
		if pkgDB.err != nil {
			return pkgDB.err
		}
		return os.Setenv(name, pkgDB.url)
	default:
		return errors.New("not a variable MainWithEnv knows")
	}
	addrs := make([]string, n)
	for i := range addrs {
		s, err := startShared()
		if err != nil {
			return err
		}
		*shared = append(*shared, s)
		addrs[i] = s.Addr()
	}
	return os.Setenv(name, strings.Join(addrs, ","))
}

// startShared starts a redis-server that lives as long as the test binary.
func startShared() (*RedisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errors.New("redis-server not found in PATH: " + installRedis)
	}
	dir, err := os.MkdirTemp("", "redfence-redis-")
	if err != nil {
		return nil, err
	}
	s := &RedisServer{bin: bin, dir: dir}
	for range 5 {
		if s.port, err = freePortErr(); err == nil {
			if err = s.start(); err == nil {
				return s, nil
			}
		}
	}
	_ = os.RemoveAll(dir)
	return nil, fmt.Errorf("shared redis-server: %w", err)
}

// quiet is a go-redis logger that prints nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
