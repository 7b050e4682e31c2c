package testutil

import (
	"net"
	"syscall"
	"testing"
)

// FreePort is a loopback TCP port free at the moment of the call; a failure
// fails the test.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := FreePortErr()
	if err != nil {
		t.Fatalf("testutil: no free loopback port: %v", err)
	}
	return p
}

// FreePortErr is FreePort for callers without a testing.TB.
func FreePortErr() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// BindLoopback binds a TCP socket to 127.0.0.1:port (0: the kernel picks)
// without a listen, and returns it and its port; the caller closes it.
func BindLoopback(port int, reuseAddr bool) (fd, bound int, err error) {
	fd, err = syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, 0, err
	}
	if reuseAddr {
		err = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1)
	}
	if err == nil {
		err = syscall.Bind(fd, &syscall.SockaddrInet4{Port: port, Addr: [4]byte{127, 0, 0, 1}})
	}
	var sa syscall.Sockaddr
	if err == nil {
		sa, err = syscall.Getsockname(fd)
	}
	if err != nil {
		_ = syscall.Close(fd)
		return -1, 0, err
	}
	return fd, sa.(*syscall.SockaddrInet4).Port, nil
}
