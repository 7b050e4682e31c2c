package testutil

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/internal/localpg"
)

// The package database lives as long as the test binary: one per package.
// This is the one piece of process-wide state in testutil, created on first
// use and torn down by Main.
var pkgDB struct {
	once     sync.Once
	err      error
	adminURL string
	name     string
	url      string
	local    *localpg.Server
}

var mainRunning bool // set by Main: Postgres needs it to drop the database at the end

// Postgres returns a pool connected to this test package's own fresh
// database, created on first use and dropped when the package's tests end
// (Main does that, so the package's TestMain must call testutil.Main).
//
// The server is, in order: REDFENCE_TEST_DATABASE_URL; the local server at
// 127.0.0.1:5432 as user postgres; a throwaway cluster started with initdb.
// When none works the test fails with what to install.
func Postgres(t testing.TB) *pgxpool.Pool {
	t.Helper()
	connString := PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, connString)
	if err != nil {
		t.Fatalf("testutil: connect to %s: %v", connString, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// PostgresURL returns the connection string of the package database.
func PostgresURL(t testing.TB) string {
	t.Helper()
	if !mainRunning {
		t.Fatal("testutil: Postgres needs the package's TestMain to call testutil.Main(m), which drops the package database")
	}
	pkgDB.once.Do(setupPostgres)
	if pkgDB.err != nil {
		t.Fatalf("testutil: no PostgreSQL: %v", pkgDB.err)
	}
	return pkgDB.url
}

func setupPostgres() {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var tried []string
	candidates := []string{}
	if u := os.Getenv("REDFENCE_TEST_DATABASE_URL"); u != "" {
		candidates = append(candidates, u)
	}
	candidates = append(candidates, "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable&connect_timeout=2")
	for _, u := range candidates {
		if err := ping(ctx, u); err != nil {
			tried = append(tried, err.Error())
			continue
		}
		pkgDB.adminURL = u
		break
	}
	if pkgDB.adminURL == "" {
		s, err := localpg.Start(ctx)
		if err != nil {
			pkgDB.err = fmt.Errorf("%s; tried %s; %w", localpg.Install, strings.Join(tried, "; "), err)
			return
		}
		pkgDB.local, pkgDB.adminURL = s, s.URL()
	}

	pkgDB.name = packageDBName()
	conn, err := pgx.Connect(ctx, pkgDB.adminURL)
	if err != nil {
		pkgDB.err = err
		return
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{pkgDB.name}.Sanitize()); err != nil {
		pkgDB.err = fmt.Errorf("create database %s: %w", pkgDB.name, err)
		return
	}
	pkgDB.url = withDatabase(pkgDB.adminURL, pkgDB.name)
}

// withDatabase points a connection string (URL or key=value form) at db.
func withDatabase(conn, db string) string {
	if u, err := url.Parse(conn); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		return u.String()
	}
	return conn + " dbname=" + db
}

func teardownPostgres() {
	if pkgDB.name != "" && pkgDB.err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, pkgDB.adminURL); err == nil {
			_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{pkgDB.name}.Sanitize()+" WITH (FORCE)")
			if err != nil {
				fmt.Fprintf(os.Stderr, "testutil: drop database %s: %v\n", pkgDB.name, err)
			}
			_ = conn.Close(context.Background())
		}
	}
	if pkgDB.local != nil {
		pkgDB.local.Stop()
	}
}

func ping(ctx context.Context, connString string) error {
	cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, connString)
	if err != nil {
		return err
	}
	return conn.Close(context.Background())
}

var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// packageDBName names the database after the package directory, so a
// leftover is easy to trace, plus random bytes so runs never collide.
func packageDBName() string {
	wd, _ := os.Getwd()
	pkg := nonIdent.ReplaceAllString(strings.ToLower(filepath.Base(wd)), "_")
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "redfence_" + pkg + "_" + hex.EncodeToString(b[:])
	if len(name) > 63 {
		name = name[:63]
	}
	return name
}
