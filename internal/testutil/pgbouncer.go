package testutil

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// InstallPgBouncer says what to install when pgbouncer is missing.
const InstallPgBouncer = "install pgbouncer (apt-get install pgbouncer; scripts/deps.sh does it as root)"

// PgBouncer starts a pgbouncer in transaction mode on a free loopback port,
// in front of the server of connString, and returns connString's database
// through it; pgbouncer stops at Cleanup. The URL asks pgx for the exec
// query mode: PgBouncer before 1.21 keeps no prepared statements across the
// transactions of one client.
func PgBouncer(t testing.TB, connString string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			t.Fatalf("testutil: no pgbouncer: %s", InstallPgBouncer)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		t.Fatalf("testutil: pgbouncer: %v", err)
	}
	dir, err := os.MkdirTemp("", "redfence-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	port := FreePort(t)
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%d
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = transaction
default_pool_size = 8
max_client_conn = 200
server_reset_query =
ignore_startup_parameters = extra_float_digits
logfile = %s
`, cfg.Host, cfg.Port, port, filepath.Join(dir, "users.txt"), filepath.Join(dir, "pgbouncer.log"))
	if err := os.WriteFile(filepath.Join(dir, "pgbouncer.ini"), []byte(ini), 0o644); err != nil {
		t.Fatal(err)
	}
	users := fmt.Sprintf("%q \"\"\n", cfg.User)
	if err := os.WriteFile(filepath.Join(dir, "users.txt"), []byte(users), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, filepath.Join(dir, "pgbouncer.ini"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 { // pgbouncer refuses to run as root
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("testutil: pgbouncer as root needs a postgres user: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, f := range []string{dir, filepath.Join(dir, "pgbouncer.ini"), filepath.Join(dir, "users.txt")} {
			if err := os.Chown(f, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testutil: start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	url := fmt.Sprintf("postgres://%s@%s/%s?sslmode=disable&default_query_exec_mode=exec", cfg.User, addr, cfg.Database)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			t.Fatalf("testutil: pgbouncer exited: %s", log)
		default:
		}
		if err := ping(ctx, url); err == nil {
			return url
		} else if ctx.Err() != nil {
			t.Fatalf("testutil: pgbouncer at %s does not answer: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond) // polling a starting server: nothing to wait on
	}
}
