// Package localpg starts a throwaway PostgreSQL cluster in a directory, for
// tests and demos on machines where no server is reachable. It runs initdb and
// postgres from PATH or /usr/lib/postgresql/*/bin; as root it runs them as the
// postgres user, since PostgreSQL refuses to run as root.
package localpg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// Install says what to install when no PostgreSQL can be found.
const Install = "install PostgreSQL (apt-get install postgresql) or set DATABASE_URL"

// Server is a running throwaway cluster.
type Server struct {
	dir    string
	port   int
	cmd    *exec.Cmd
	exited chan struct{}

	bin, data string // to start it again (Restart)
	cred      *syscall.Credential
}

// URL is a connection string for the postgres database as user postgres.
func (s *Server) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Stop ends the server and removes its directory.
func (s *Server) Stop() {
	s.Resume()
	_ = s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
	_ = os.RemoveAll(s.dir)
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Pause stops every process of the server (SIGSTOP to its process group):
// connections stay open and nothing answers, as a server stalled by its
// host. Resume continues it.
func (s *Server) Pause() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGSTOP) }

// Resume continues a paused server.
func (s *Server) Resume() { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGCONT) }

// Restart stops the server (a fast shutdown: sessions are cut, what was
// committed stays) and starts it again on the same port and data.
func (s *Server) Restart(ctx context.Context) error {
	s.Resume() // a paused server cannot shut down
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	<-s.exited
	n, err := run(ctx, s.bin, s.dir, s.data, s.port, s.cred)
	if err != nil {
		return err
	}
	s.cmd, s.exited = n.cmd, n.exited
	return nil
}

// Bin finds a PostgreSQL server program (initdb, postgres) or returns an
// error saying what to install.
func Bin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return "", fmt.Errorf("localpg: %s not found: %s", name, Install)
	}
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}

// Start creates a new cluster in a fresh temporary directory and starts it on
// a free loopback port with trust authentication. The server gets SIGKILL if
// this process dies, so it never outlives its owner.
func Start(ctx context.Context) (*Server, error) {
	initdb, err := Bin("initdb")
	if err != nil {
		return nil, err
	}
	postgres, err := Bin("postgres")
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "redfence-pg-")
	if err != nil {
		return nil, err
	}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("localpg: running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("localpg: initdb: %w\n%s", err, out.String())
	}

	for range 5 {
		port, err := freePort()
		if err != nil {
			break
		}
		s, err := run(ctx, postgres, dir, data, port, cred)
		if err == nil {
			return s, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	_ = os.RemoveAll(dir)
	return nil, errors.New("localpg: postgres did not start")
}

func run(ctx context.Context, bin, dir, data string, port int, cred *syscall.Credential) (*Server, error) {
	var out bytes.Buffer
	cmd := exec.Command(bin, "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = &out, &out
	// A process group of its own, so that Pause reaches every backend.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &Server{dir: dir, port: port, cmd: cmd, exited: make(chan struct{}), bin: bin, data: data, cred: cred}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, s.URL())
		if err == nil {
			// Another package's throwaway server can hold the port when
			// ours fails to bind it; only the data directory tells them apart.
			var got string
			err = conn.QueryRow(cctx, "SHOW data_directory").Scan(&got)
			_ = conn.Close(context.Background())
			if err == nil && got != data {
				err = fmt.Errorf("another postgres answers there (data directory %s)", got)
			}
		}
		cancel()
		if err == nil {
			return s, nil
		}
		select {
		case <-s.exited:
			return nil, fmt.Errorf("localpg: postgres exited: %s", out.String())
		default:
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			_ = cmd.Process.Kill()
			<-s.exited
			return nil, fmt.Errorf("localpg: postgres not ready: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
