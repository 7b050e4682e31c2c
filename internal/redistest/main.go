package redistest

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

	"github.com/redfence/redfence/internal/testutil"
)

// Main is testutil.Main with go-redis's logger silenced: it logs each
// failed dial, and the tests that cause them on purpose would bury real
// failures under them. Errors still reach the tests.
func Main(m *testing.M, opts ...goleak.Option) {
	MainWithEnv(m, nil, opts...)
}

// The variables MainWithEnv sets besides testutil.EnvDatabaseURL, for
// Example functions: they get no *testing.T and find their servers in the
// environment, as a reader's program would.
const (
	EnvRedisAddr    = "REDIS_ADDR"    // host:port of a private redis-server
	EnvRedlockAddrs = "REDLOCK_ADDRS" // three more, comma-separated: Redlock masters
)

// MainWithEnv is Main that first sets each of vars (EnvRedisAddr,
// EnvRedlockAddrs, testutil.EnvDatabaseURL) to servers private to the
// package's test binary. The redis-servers stop, and the database is
// dropped, after the tests.
func MainWithEnv(m *testing.M, vars []string, opts ...goleak.Option) {
	redis.SetLogger(quiet{})
	testutil.Run(m, func() (func(), error) {
		var shared []*RedisServer
		teardown := func() {
			for _, s := range shared {
				s.stop()
				_ = os.RemoveAll(s.dir)
			}
		}
		for _, name := range vars {
			if err := setEnv(name, &shared); err != nil {
				return teardown, fmt.Errorf("%s: %w", name, err)
			}
		}
		return teardown, nil
	}, opts...)
}

// setEnv starts the servers behind one of MainWithEnv's variables, appending
// redis-servers to shared for the teardown to stop, and sets the variable.
func setEnv(name string, shared *[]*RedisServer) error {
	n := 0
	switch name {
	case EnvRedisAddr:
		n = 1
	case EnvRedlockAddrs:
		n = 3
	case testutil.EnvDatabaseURL:
		return testutil.SetDatabaseURL()
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
		if s.port, err = testutil.FreePortErr(); err == nil {
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
