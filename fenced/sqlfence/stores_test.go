package sqlfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/require"
	_ "modernc.org/sqlite"

	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/testutil"
)

// store is one database the tests run against: a dialect, how to open a
// database for a test, and the DDL of the tests' own tables.
type store struct {
	name    string
	dialect sqlfence.Dialect
	// open returns a database for t: the package's (PostgreSQL, MySQL), or a
	// fresh file (SQLite). extra is added to the DSN.
	open func(t *testing.T, extra ...string) *sql.DB
	// serial is the id column of a data table: it numbers inserts.
	serial string
	// text is a short text column's type.
	text string
	// engine follows a CREATE TABLE.
	engine string
}

var stores = []store{
	{
		name: "postgres", dialect: sqlfence.Postgres,
		open: func(t *testing.T, extra ...string) *sql.DB {
			// 32 writers open 32 connections at once, each a new backend:
			// on a busy 2-core host that takes longer than testutil's 2 s.
			u, err := url.Parse(testutil.PostgresURL(t))
			require.NoError(t, err)
			q := u.Query()
			q.Set("connect_timeout", "20")
			u.RawQuery = q.Encode()
			return openDB(t, "pgx", withParams(u.String(), extra))
		},
		serial: "bigserial PRIMARY KEY", text: "text",
	},
	{
		name: "mysql", dialect: sqlfence.MySQL,
		open: func(t *testing.T, extra ...string) *sql.DB {
			return openDB(t, "mysql", withParams(testutil.MySQLDSN(t), extra))
		},
		serial: "BIGINT AUTO_INCREMENT PRIMARY KEY", text: "VARCHAR(255)", engine: " ENGINE=InnoDB",
	},
	{
		// The DSN has a busy timeout and nothing else the guard needs: a
		// deferred BEGIN, the driver's default.
		name: "sqlite", dialect: sqlfence.SQLite,
		open: func(t *testing.T, extra ...string) *sql.DB {
			return openDB(t, "sqlite", testutil.SQLiteDSN(t, extra...))
		},
		serial: "INTEGER PRIMARY KEY AUTOINCREMENT", text: "TEXT",
	},
	{
		name: "sqlite-immediate", dialect: sqlfence.SQLite,
		open: func(t *testing.T, extra ...string) *sql.DB {
			return openDB(t, "sqlite", testutil.SQLiteDSN(t, append([]string{"_txlock=immediate"}, extra...)...))
		},
		serial: "INTEGER PRIMARY KEY AUTOINCREMENT", text: "TEXT",
	},
}

// withParams adds query parameters to a URL or DSN.
func withParams(dsn string, params []string) string {
	for _, p := range params {
		if strings.Contains(dsn, "?") {
			dsn += "&" + p
		} else {
			dsn += "?" + p
		}
	}
	return dsn
}

func openDB(t *testing.T, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// variants are more ways to open MySQL, for the tests of the atomic step:
// the isolation levels other than InnoDB's default, and the DSN parameters
// that change what the driver reports or sends.
var variants = []store{
	mysqlVariant("mysql-read-committed", "READ-COMMITTED"),
	mysqlVariant("mysql-serializable", "SERIALIZABLE"),
	mysqlVariant("mysql-found-rows-interpolated", "", "clientFoundRows=true", "interpolateParams=true"),
}

func mysqlVariant(name, isolation string, params ...string) store {
	s := stores[1]
	s.name = name
	open := s.open
	s.open = func(t *testing.T, extra ...string) *sql.DB {
		ps := slices.Clone(params)
		variable := ""
		if isolation != "" {
			// MariaDB before 11.1 knows only tx_isolation, MySQL 8 only
			// transaction_isolation.
			variable = "transaction_isolation"
			var version string
			require.NoError(t, open(t).QueryRow("SELECT VERSION()").Scan(&version))
			if strings.Contains(version, "MariaDB") {
				variable = "tx_isolation"
			}
			ps = append(ps, variable+"="+url.QueryEscape("'"+isolation+"'"))
		}
		db := open(t, append(ps, extra...)...)
		if variable != "" {
			var got string
			require.NoError(t, db.QueryRow("SELECT @@"+variable).Scan(&got))
			require.Equal(t, isolation, got)
		}
		return db
	}
	return s
}

// eachStore runs f as a subtest per store.
func eachStore(t *testing.T, f func(t *testing.T, s store)) {
	for _, s := range stores {
		t.Run(s.name, func(t *testing.T) { f(t, s) })
	}
}

// eachVariant runs f as a subtest per store and variant.
func eachVariant(t *testing.T, f func(t *testing.T, s store)) {
	for _, s := range append(stores[:len(stores):len(stores)], variants...) {
		t.Run(s.name, func(t *testing.T) { f(t, s) })
	}
}

// q rewrites a statement written with ? placeholders for s.
func (s store) q(stmt string) string {
	if s.dialect != sqlfence.Postgres {
		return stmt
	}
	var b strings.Builder
	n := 0
	for _, r := range stmt {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

var tableSeq atomic.Int64

// env is one test's database, guard and tables.
type env struct {
	s      store
	db     *sql.DB
	g      *sqlfence.Guard
	fences string // unquoted: the test names are plain
	data   string
}

// setup gives each test its own fence table and data table, so that tests
// cannot see each other's tokens.
func setup(t *testing.T, s store, opts ...sqlfence.Option) *env {
	t.Helper()
	return setupDB(t, s, s.open(t), opts...)
}

func setupDB(t *testing.T, s store, db *sql.DB, opts ...sqlfence.Option) *env {
	t.Helper()
	n := tableSeq.Add(1)
	e := &env{s: s, db: db,
		fences: fmt.Sprintf("fences_%s_%d", sanitize(t.Name()), n),
		data:   fmt.Sprintf("data_%s_%d", sanitize(t.Name()), n)}
	e.g = newGuard(t, db, s.dialect, append([]sqlfence.Option{sqlfence.WithTable(e.fences)}, opts...)...)
	require.NoError(t, e.g.Migrate(context.Background()))
	e.exec(t, `CREATE TABLE `+e.data+` (id `+s.serial+`, resource `+s.text+` NOT NULL, token BIGINT NOT NULL, tag `+s.text+` NOT NULL, seq BIGINT NOT NULL DEFAULT 0)`+s.engine)
	return e
}

// newGuard is sqlfence.New for input it must accept: an error fails the
// test.
func newGuard(t testing.TB, db sqlfence.Beginner, d sqlfence.Dialect, opts ...sqlfence.Option) *sqlfence.Guard {
	t.Helper()
	g, err := sqlfence.New(db, d, opts...)
	require.NoError(t, err)
	require.NotNil(t, g)
	return g
}

func sanitize(s string) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) > 30 {
		b = b[len(b)-30:]
	}
	return string(b)
}

func (e *env) exec(t *testing.T, stmt string, args ...any) {
	t.Helper()
	_, err := e.db.Exec(e.s.q(stmt), args...)
	require.NoError(t, err)
}

// insert is an fn that writes one row to the data table.
func (e *env) insert(resource string, token int64, tag string) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, e.s.q(`INSERT INTO `+e.data+` (resource, token, tag) VALUES (?, ?, ?)`), resource, token, tag)
		return err
	}
}

// tags lists the data table's tags in insert order.
func (e *env) tags(t *testing.T) []string {
	t.Helper()
	return column[string](t, e.db, `SELECT tag FROM `+e.data+` ORDER BY id`)
}

func column[T any](t *testing.T, db *sql.DB, stmt string, args ...any) []T {
	t.Helper()
	rows, err := db.Query(stmt, args...)
	require.NoError(t, err)
	defer rows.Close()
	out := []T{}
	for rows.Next() {
		var v T
		require.NoError(t, rows.Scan(&v))
		out = append(out, v)
	}
	require.NoError(t, rows.Err())
	return out
}

// fence reads the token recorded for resource, or -1 when none is.
func (e *env) fence(t *testing.T, resource string) int64 {
	t.Helper()
	toks := column[int64](t, e.db, e.s.q(`SELECT token FROM `+e.fences+` WHERE resource = ?`), resource)
	if len(toks) == 0 {
		return -1
	}
	return toks[0]
}
