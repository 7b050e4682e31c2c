package testutil

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// EnvMySQLDSN overrides the MySQL or MariaDB server the tests use: a
// go-sql-driver/mysql DSN of a user who may create and drop databases,
// such as "root:secret@tcp(127.0.0.1:3306)/".
const EnvMySQLDSN = "REDFENCE_TEST_MYSQL_DSN"

// defaultMySQL is the local server as Debian's mariadb-server runs it,
// with root allowed in over TCP without a password.
const defaultMySQL = "root@tcp(127.0.0.1:3306)/"

const installMySQL = "install and start MariaDB (Debian/Ubuntu: apt-get install mariadb-server; service mariadb start), " +
	"let root in from 127.0.0.1 (CREATE USER 'root'@'127.0.0.1'; GRANT ALL ON *.* TO 'root'@'127.0.0.1'), " +
	"or set " + EnvMySQLDSN + " to a server's DSN"

// The package's MySQL database lives as long as the test binary, like the
// PostgreSQL one: created on first use, dropped by Main.
var pkgMySQL struct {
	once  sync.Once
	err   error
	admin *mysql.Config
	name  string
	dsn   string
}

// MySQL returns a pool connected to this test package's own fresh database
// on the MySQL or MariaDB server at EnvMySQLDSN, or else at 127.0.0.1:3306
// as root without a password. The database is created on first use and
// dropped when the package's tests end (Main does that, so the package's
// TestMain must call testutil.Main). When no server answers, the test fails
// with what to install.
func MySQL(t testing.TB) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", MySQLDSN(t))
	if err != nil {
		t.Fatalf("testutil: MySQL: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// MySQLDSN returns the go-sql-driver/mysql DSN of the package database.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	if !mainRunning {
		t.Fatal("testutil: MySQL needs the package's TestMain to call testutil.Main(m), which drops the package database")
	}
	pkgMySQL.once.Do(setupMySQL)
	if pkgMySQL.err != nil {
		t.Fatalf("testutil: no MySQL: %v", pkgMySQL.err)
	}
	return pkgMySQL.dsn
}

func setupMySQL() {
	dsn := os.Getenv(EnvMySQLDSN)
	if dsn == "" {
		dsn = defaultMySQL
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		pkgMySQL.err = fmt.Errorf("%s: %w", EnvMySQLDSN, err)
		return
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 2 * time.Second
	}
	cfg.DBName = ""
	pkgMySQL.admin = cfg
	name := packageDBName()
	err = withMySQLAdmin(func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, "CREATE DATABASE `"+name+"`")
		return err
	})
	if err != nil {
		pkgMySQL.err = fmt.Errorf("%s: %w; %s", cfg.Addr, err, installMySQL)
		return
	}
	pkgMySQL.name = name
	pkg := cfg.Clone()
	pkg.DBName = name
	pkgMySQL.dsn = pkg.FormatDSN()
}

func teardownMySQL() {
	if pkgMySQL.name == "" {
		return
	}
	err := withMySQLAdmin(func(ctx context.Context, db *sql.DB) error {
		_, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+pkgMySQL.name+"`")
		return err
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "testutil: drop database %s: %v\n", pkgMySQL.name, err)
	}
}

// withMySQLAdmin runs fn on a connection of the admin DSN, with a bound.
func withMySQLAdmin(fn func(context.Context, *sql.DB) error) error {
	conn, err := mysql.NewConnector(pkgMySQL.admin)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return fn(ctx, db)
}

// SQLiteDSN returns a modernc.org/sqlite DSN of a fresh database file in
// the test's temporary directory, in WAL mode, waiting up to 10 s for
// another connection's lock (busy_timeout) instead of failing at once.
// extra, such as "_txlock=immediate", is appended to the query.
func SQLiteDSN(t testing.TB, extra ...string) string {
	t.Helper()
	dsn := "file:" + t.TempDir() + "/test.db?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
	for _, e := range extra {
		dsn += "&" + e
	}
	return dsn
}
