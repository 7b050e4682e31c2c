// Package embedded finds the examples their servers: the one a URL names,
// else one that needs nothing installed (Redis: miniredis, in the process;
// PostgreSQL: a throwaway cluster from the installed server binaries), so
// that `go run ./examples/...` works on a fresh machine. It is the examples'
// plumbing, not redfence's API; an example copied out of this repository
// still imports it.
package embedded

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

	"github.com/alicebob/miniredis/v2"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
)

// Redis returns a client factory for url (REDIS_URL), or, when url is
// empty, for an embedded in-process Redis (miniredis) that needs nothing
// installed. where says which, for the demo's header; stop ends the
// embedded server. Each call of newClient makes a client of its own, as a
// separate process would have. Every client applies context deadlines to
// its sockets (ContextTimeoutEnabled): a hung Redis then costs a call its
// deadline, not the client's ReadTimeout.
//
// A server named by url must answer a PING within a few seconds; if it does
// not, Redis returns an error that names its address and the cause.
func Redis(ctx context.Context, url string) (newClient func() redis.UniversalClient, where string, stop func(), err error) {
	if url != "" {
		opts, err := redis.ParseURL(url)
		if err != nil {
			return nil, "", nil, fmt.Errorf("REDIS_URL: %w", err)
		}
		opts.ContextTimeoutEnabled = true
		if err := pingRedis(ctx, *opts); err != nil {
			return nil, "", nil, fmt.Errorf("cannot reach Redis at %s: %w (unset REDIS_URL to use the embedded Redis)", opts.Addr, err)
		}
		return func() redis.UniversalClient { return redis.NewClient(opts) }, "REDIS_URL (" + opts.Addr + ")", func() {}, nil
	}
	mr, err := miniredis.Run()
	if err != nil {
		return nil, "", nil, fmt.Errorf("embedded redis: %w", err)
	}
	return func() redis.UniversalClient {
			return redis.NewClient(&redis.Options{Addr: mr.Addr(), ContextTimeoutEnabled: true})
		},
		"embedded in this process (set REDIS_URL to use a real server)", mr.Close, nil
}

// checkTimeout bounds the check that the server named by REDIS_URL answers.
const checkTimeout = 3 * time.Second

// pingRedis sends one PING, once, within checkTimeout, with a client of its
// own that honours the deadline for dialling and reading alike.
func pingRedis(ctx context.Context, opts redis.Options) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	opts.MaxRetries, opts.DialerRetries = -1, 1 // a refused dial is an answer
	c := redis.NewClient(&opts)
	defer c.Close()
	err := c.Ping(ctx).Err()
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return fmt.Errorf("no answer within %v: %w", checkTimeout, err)
	}
	return err
}

// Postgres returns url (DATABASE_URL), checked, or, when url is empty,
// the URL of a throwaway local PostgreSQL that stop ends and removes. where
// says which, for the example's header; name names its directory. Nothing
// of this is redfence's: it only finds the example a database.
func Postgres(ctx context.Context, url, name string) (connString, where string, stop func(), err error) {
	if url != "" {
		cfg, err := pgx.ParseConfig(url)
		if err != nil {
			return "", "", nil, fmt.Errorf("DATABASE_URL: %w", err)
		}
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
		if err := pingPostgres(ctx, cfg); err != nil {
			return "", "", nil, fmt.Errorf("cannot reach PostgreSQL at %s: %w (unset DATABASE_URL to use a throwaway local PostgreSQL)", addr, err)
		}
		return url, "DATABASE_URL (" + addr + ")", func() {}, nil
	}
	url, stop, err = throwawayPostgres(ctx, name)
	if err != nil {
		return "", "", nil, fmt.Errorf("no DATABASE_URL and no throwaway PostgreSQL: %w (install PostgreSQL, apt-get install postgresql, or set DATABASE_URL)", err)
	}
	return url, "a throwaway local cluster (set DATABASE_URL to use yours)", stop, nil
}

// pingPostgres connects and pings once, within checkTimeout.
func pingPostgres(ctx context.Context, cfg *pgx.ConnConfig) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		defer conn.Close(context.WithoutCancel(ctx))
		err = conn.Ping(ctx)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %v: %w", checkTimeout, err)
	}
	return err
}

// throwawayPostgres runs initdb and postgres (from PATH or
// /usr/lib/postgresql/*/bin) in a temporary directory, on a free loopback
// port, with trust authentication and no durability; as root, as the
// postgres user, since PostgreSQL refuses root. The server gets SIGKILL if
// this process dies.
func throwawayPostgres(ctx context.Context, name string) (url string, stop func(), err error) {
	initdb, err1 := pgBin("initdb")
	postgres, err2 := pgBin("postgres")
	if err := errors.Join(err1, err2); err != nil {
		return "", nil, err
	}
	dir, err := os.MkdirTemp("", "redfence-"+name+"-pg-")
	if err != nil {
		return "", nil, err
	}
	attr := &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", nil, fmt.Errorf("running as root needs a postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		attr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		_ = os.Chown(dir, uid, gid)
	}
	data := filepath.Join(dir, "data")
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, initdb, "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
	cmd.Stdout, cmd.Stderr, cmd.SysProcAttr = &out, &out, attr
	if err := cmd.Run(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, fmt.Errorf("initdb: %w\n%s", err, out.String())
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port, for postgres to bind
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	_ = ln.Close()
	srv := exec.Command(postgres, "-D", data, "-p", strconv.Itoa(port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "full_page_writes=off")
	srv.Stdout, srv.Stderr, srv.SysProcAttr = &out, &out, attr
	if err := srv.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return "", nil, err
	}
	exited := make(chan struct{})
	go func() { _ = srv.Wait(); close(exited) }()
	stop = func() {
		_ = srv.Process.Signal(syscall.SIGINT) // fast shutdown
		<-exited
		_ = os.RemoveAll(dir)
	}
	url = fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	if err := awaitPostgres(ctx, url, exited); err != nil {
		stop()
		return "", nil, fmt.Errorf("%w\n%s", err, out.String())
	}
	return url, stop, nil
}

// awaitPostgres waits until the server at url answers, for up to 30 s.
func awaitPostgres(ctx context.Context, url string, exited <-chan struct{}) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(cctx, url)
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		select {
		case <-exited:
			return errors.New("postgres exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready: %w", err)
		}
	}
}

// pgBin finds a PostgreSQL server program.
func pgBin(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(matches) == 0 {
		return "", fmt.Errorf("%s not found", name)
	}
	sort.Strings(matches)
	return matches[len(matches)-1], nil
}
