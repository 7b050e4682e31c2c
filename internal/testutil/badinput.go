package testutil

import (
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Safely runs fn and returns its error, failing the test if fn panics or
// has not returned within bound: bad input must get an error, at once.
func Safely(t testing.TB, bound time.Duration, fn func() error) error {
	t.Helper()
	type result struct {
		err      error
		panicked any
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if v := recover(); v != nil {
				done <- result{panicked: v}
			}
		}()
		done <- result{err: fn()}
	}()
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case res := <-done:
		if res.panicked != nil {
			t.Fatalf("panicked: %v", res.panicked)
		}
		return res.err
	case <-timer.C:
		t.Fatalf("still running after %v", bound)
		return nil
	}
}

// RefusedAddr is a loopback address where nothing listens: connections to
// it are refused. Its port stays bound, without a listen, until the test's
// cleanup, so no server that another test package starts meanwhile can take
// it: a closed listener's port would go back to the pool, and a paused
// server there accepts and never answers.
func RefusedAddr(t testing.TB) string {
	t.Helper()
	fd, port, err := BindLoopback(0, false)
	require.NoError(t, err, "bind a loopback port")
	t.Cleanup(func() { _ = syscall.Close(fd) })
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// SilentServer accepts TCP connections and never answers: a server that
// hangs. It stops, and closes its connections, at the test's cleanup.
func SilentServer(t testing.TB) string {
	t.Helper()
	addr, _ := HungServer(t)
	return addr
}

// HungServer is SilentServer that also says, on accepted, when it accepts
// a connection: a test can then act once a client is waiting on it. The
// channel holds up to 64 reports; later ones are dropped.
func HungServer(t testing.TB) (addr string, accepted <-chan struct{}) {
	t.Helper()
	got := make(chan struct{}, 64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var (
		mu    sync.Mutex
		conns []net.Conn
		wg    sync.WaitGroup
	)
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			select {
			case got <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return ln.Addr().String(), got
}
