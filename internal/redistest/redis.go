package redistest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/testutil"
)

const installRedis = "install redis-server (apt-get install redis-server)"

// RedisServer is a private redis-server process on a loopback port. Its
// methods are safe for concurrent use. Everything it starts is stopped by the
// test's Cleanup, also when the test fails or panics; the child also gets
// SIGKILL if the test binary dies (Pdeathsig), so no server outlives go test.
type RedisServer struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	// busPort is a cluster node's cluster bus port; 0 outside cluster mode.
	// Left to redis-server it is port+10000, which it refuses for a port
	// above 55535: a quarter of the kernel's ephemeral range.
	busPort int
	args    []string
	conf    string // sentinel mode: the config file Sentinel requires (and rewrites)

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	paused bool
	// held are sockets bound, without a listen, to the ports of a killed
	// server until it runs again: connections are refused as with nothing
	// there, and no other package's server is given the ports meanwhile.
	held []int
}

// RedisOption adjusts the server started by Redis and RedisN.
type RedisOption func(*[]string)

// WithRedisArgs passes extra command-line arguments to redis-server,
// e.g. "--cluster-enabled", "yes".
func WithRedisArgs(args ...string) RedisOption {
	return func(a *[]string) { *a = append(*a, args...) }
}

// Redis starts a private redis-server for this test and returns a client
// connected to it and the handle that pauses, kills and restarts it. The
// server keeps nothing on disk. A missing binary fails the test with what to
// install.
func Redis(t testing.TB, opts ...RedisOption) (*redis.Client, *RedisServer) {
	t.Helper()
	srv := StartRedis(t, opts...)
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	return c, srv
}

// RedisN starts n independent redis-servers (for Redlock) and returns a
// client for each, as redis.UniversalClient, and their handles.
func RedisN(t testing.TB, n int, opts ...RedisOption) ([]redis.UniversalClient, []*RedisServer) {
	t.Helper()
	clients := make([]redis.UniversalClient, n)
	servers := make([]*RedisServer, n)
	for i := range n {
		clients[i], servers[i] = Redis(t, opts...)
	}
	return clients, servers
}

// StartRedis starts a redis-server without creating a client.
func StartRedis(t testing.TB, opts ...RedisOption) *RedisServer {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: redis-server not found in PATH: %s", installRedis)
	}
	var extra []string
	for _, o := range opts {
		if o != nil {
			o(&extra)
		}
	}
	srv := &RedisServer{t: t, bin: bin, dir: t.TempDir(), args: extra}
	t.Cleanup(srv.stop)

	// A free port can be taken by another package's server between our probe
	// and redis-server's bind; try a few.
	cluster := slices.Contains(extra, "--cluster-enabled")
	var lastErr error
	for range 5 {
		srv.port = testutil.FreePort(t)
		if cluster {
			srv.busPort = testutil.FreePort(t)
			for srv.busPort == srv.port {
				srv.busPort = testutil.FreePort(t)
			}
		}
		if lastErr = srv.start(); lastErr == nil {
			return srv
		}
	}
	t.Fatalf("redistest: redis-server did not start: %v", lastErr)
	return nil
}

// Addr returns host:port of the server.
func (s *RedisServer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Port returns the server's TCP port.
func (s *RedisServer) Port() int { return s.port }

// Client returns a new client for the server; the caller closes it. It
// honours context deadlines on the socket (ContextTimeoutEnabled), so tests
// that pause the server stay fast. Tests of behaviour with go-redis's default
// options (deadlines not applied to reads) build their own client on Addr.
func (s *RedisServer) Client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: time.Second, ContextTimeoutEnabled: true})
}

// PID returns the server's process id, or 0 when it is not running.
func (s *RedisServer) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Pause stops the server with SIGSTOP: connections stay open, nothing answers.
func (s *RedisServer) Pause() { s.signal(syscall.SIGSTOP, true) }

// Resume continues a paused server with SIGCONT.
func (s *RedisServer) Resume() { s.signal(syscall.SIGCONT, false) }

func (s *RedisServer) signal(sig syscall.Signal, paused bool) {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Fatalf("redistest: redis-server on %s is not running", s.Addr())
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("redistest: signal redis-server: %v", err)
	}
	s.paused = paused
}

// Kill ends the server with SIGKILL and waits for it; its data is gone.
// Its port stays its own, refusing connections, until Restart.
func (s *RedisServer) Kill() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	s.holdLocked()
}

// Restart starts a killed (or running, which is killed first) server again on
// the same port, with no data.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.mu.Lock()
	s.killLocked()
	s.holdLocked()
	s.mu.Unlock()
	var err error
	deadline := time.Now().Add(5 * time.Second)
	for {
		// The old socket can linger briefly; retry the same port.
		if err = s.start(); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.mu.Lock()
	s.releaseLocked()
	s.mu.Unlock()
	if err != nil {
		s.t.Fatalf("redistest: restart redis-server on %s: %v", s.Addr(), err)
	}
}

// holdLocked binds the server's ports, without a listen, while it is down.
// With SO_REUSEADDR: the killed server's connections linger on the port,
// and redis-server, which sets it too, can bind and listen beside these
// sockets when it restarts. The kernel's choice of a free port (bind to
// port 0, as freePort does in every package) passes over a bound one.
func (s *RedisServer) holdLocked() {
	if s.held != nil {
		return
	}
	s.held = []int{}
	for _, port := range []int{s.port, s.busPort} {
		if port == 0 {
			continue
		}
		if fd, _, err := testutil.BindLoopback(port, true); err == nil {
			s.held = append(s.held, fd)
		}
	}
}

func (s *RedisServer) releaseLocked() {
	for _, fd := range s.held {
		_ = syscall.Close(fd)
	}
	s.held = nil
}

func (s *RedisServer) killLocked() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.paused = nil, false
}

func (s *RedisServer) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && s.paused {
		_ = s.cmd.Process.Signal(syscall.SIGCONT)
	}
	s.killLocked()
	s.releaseLocked()
}

func (s *RedisServer) start() error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--dir", s.dir,
		"--daemonize", "no",
		"--protected-mode", "no",
		"--enable-debug-command", "local",
		"--logfile", "redis.log",
	}
	if s.busPort != 0 {
		args = append(args, "--cluster-port", strconv.Itoa(s.busPort))
	}
	args = append(args, s.args...)
	if s.conf != "" {
		args = append([]string{s.conf, "--sentinel"}, args...)
	}
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w (%s)", s.bin, err, installRedis)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()

	if err := waitRedis(s.Addr(), cmd.Process.Pid, exited, 10*time.Second); err != nil {
		_ = cmd.Process.Kill()
		<-exited
		log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
		return fmt.Errorf("%w\n%s%s", err, stderr.String(), tail(log, 2000))
	}
	s.mu.Lock()
	s.cmd, s.exited, s.paused = cmd, exited, false
	s.mu.Unlock()
	return nil
}

// waitRedis waits until the redis-server with process id pid answers at
// addr. Another package's server can hold the port when ours fails to bind
// it, and answers pings too; only its process id tells them apart.
func waitRedis(addr string, pid int, exited <-chan struct{}, within time.Duration) error {
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer c.Close()
	deadline := time.Now().Add(within)
	want := "process_id:" + strconv.Itoa(pid) + "\r\n"
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		info, err := c.Info(ctx, "server").Result()
		cancel()
		if err == nil {
			if strings.Contains(info, want) {
				return nil
			}
			err = errors.New("another redis-server answers there")
		}
		select {
		case <-exited:
			return fmt.Errorf("redis-server exited: %w", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s not ready: %w", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}
