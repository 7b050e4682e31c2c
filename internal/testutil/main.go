package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests, then tears down what outlives single tests
// (the package's PostgreSQL database), then, when the tests passed, fails the
// run if any goroutine is left (goleak). Call it from TestMain:
//
//	func TestMain(m *testing.M) { testutil.Main(m) }
func Main(m *testing.M, opts ...goleak.Option) {
	run(m, nil, opts)
}

// MainWithRedis is Main with one more private redis-server for the whole
// package, for Example functions, which get no *testing.T: its address is
// stored in *addr before the tests run.
func MainWithRedis(m *testing.M, addr *string, opts ...goleak.Option) {
	run(m, addr, opts)
}

func run(m *testing.M, addr *string, opts []goleak.Option) {
	mainRunning = true
	var shared *RedisServer
	if addr != nil {
		bin, err := exec.LookPath("redis-server")
		if err != nil {
			fmt.Fprintln(os.Stderr, "testutil: redis-server not found in PATH: "+installRedis)
			os.Exit(1)
		}
		dir, err := os.MkdirTemp("", "redfence-redis-")
		if err == nil {
			shared = &RedisServer{bin: bin, dir: dir}
			for range 5 {
				if shared.port, err = freePortErr(); err == nil {
					if err = shared.start(); err == nil {
						break
					}
				}
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "testutil: shared redis-server:", err)
			os.Exit(1)
		}
		*addr = shared.Addr()
	}
	code := m.Run()
	if shared != nil {
		shared.stop()
		_ = os.RemoveAll(shared.dir)
	}
	teardownPostgres()
	if code == 0 {
		if err := goleak.Find(opts...); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines left after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
