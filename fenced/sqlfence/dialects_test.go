package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/testutil"
)

// TestLockErrorsReachCaller: a writer that the database stops while it waits
// for the fence gets the database's error back, wrapped and unchanged, so
// that it can retry; nothing of it is committed.
func TestLockErrorsReachCaller(t *testing.T) {
	t.Run("postgres repeatable read: 40001", func(t *testing.T) {
		s := stores[0]
		e := setupDB(t, s, s.open(t, "default_transaction_isolation="+strings.ReplaceAll("repeatable read", " ", "%20")))
		waiting := func() bool {
			var n int
			_ = e.db.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()`).Scan(&n)
			return n > 0
		}
		err := secondWriter(t, e, e.g, waiting, true)
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		assert.Equal(t, "40001", pgErr.Code)
	})
	t.Run("mysql lock wait timeout: 1205", func(t *testing.T) {
		s := stores[1]
		e := setup(t, s)
		impatient := newGuard(t, s.open(t, "innodb_lock_wait_timeout=1"), s.dialect, sqlfence.WithTable(e.fences))
		err := secondWriter(t, e, impatient, nil, false)
		var myErr *mysql.MySQLError
		require.ErrorAs(t, err, &myErr)
		assert.Equal(t, uint16(1205), myErr.Number)
	})
	t.Run("sqlite busy: 5", func(t *testing.T) {
		s := stores[2]
		dsn := testutil.SQLiteDSN(t)
		e := setupDB(t, s, openDB(t, "sqlite", dsn))
		impatient := newGuard(t, openDB(t, "sqlite", strings.Replace(dsn, "busy_timeout(10000)", "busy_timeout(100)", 1)), s.dialect, sqlfence.WithTable(e.fences))
		err := secondWriter(t, e, impatient, nil, false)
		var liteErr *sqlite.Error
		require.ErrorAs(t, err, &liteErr)
		assert.Equal(t, 5, liteErr.Code(), "SQLITE_BUSY")
	})
	t.Run("sqlite Check after a read: 517", func(t *testing.T) {
		// A deferred transaction reads, another writer commits, and the
		// first cannot take the write lock on its stale snapshot, however
		// long its busy timeout (see the package doc on Check).
		e := setup(t, stores[2])
		ctx := context.Background()
		require.NoError(t, e.g.Do(ctx, "r", 1, e.insert("r", 1, "seed")))
		tx, err := e.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback() }()
		var n int
		require.NoError(t, tx.QueryRowContext(ctx, `SELECT count(*) FROM `+e.data).Scan(&n))
		require.NoError(t, e.g.Do(ctx, "r", 2, e.insert("r", 2, "other")))
		err = e.g.Check(ctx, tx, "r", 3)
		var liteErr *sqlite.Error
		require.ErrorAs(t, err, &liteErr)
		assert.Equal(t, 517, liteErr.Code(), "SQLITE_BUSY_SNAPSHOT")
	})
}

// secondWriter holds the fence of a resource in one Do (through e.g) while
// a second Do (through g2) tries the same resource; when the first should
// commit before the second gives up (commitFirst), it does once waiting()
// says the second waits. It returns the second's error, which must not
// be a stale rejection, after checking that the second wrote nothing.
func secondWriter(t *testing.T, e *env, g2 *sqlfence.Guard, waiting func() bool, commitFirst bool) error {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, e.g.Do(ctx, "held", 1, e.insert("held", 1, "seed")))
	inFirst, release := make(chan struct{}), make(chan struct{})
	firstErr := make(chan error, 1)
	go func() {
		firstErr <- e.g.Do(ctx, "held", 2, func(ctx context.Context, tx *sql.Tx) error {
			close(inFirst)
			<-release
			return e.insert("held", 2, "first")(ctx, tx)
		})
	}()
	<-inFirst
	secondErr := make(chan error, 1)
	go func() { secondErr <- g2.Do(ctx, "held", 3, e.insert("held", 3, "second")) }()
	var err error
	if commitFirst {
		require.Eventually(t, waiting, 10*time.Second, 5*time.Millisecond)
		close(release)
		require.NoError(t, <-firstErr)
		err = <-secondErr
	} else {
		err = <-secondErr
		close(release)
		require.NoError(t, <-firstErr)
	}
	require.Error(t, err)
	assert.NotErrorIs(t, err, sqlfence.ErrStaleToken)
	assert.Equal(t, []string{"seed", "first"}, e.tags(t))
	return err
}

// TestMySQLNeedsInnoDB: Migrate refuses a fence table whose engine has no
// row locks.
func TestMySQLNeedsInnoDB(t *testing.T) {
	e := setup(t, stores[1])
	e.exec(t, "CREATE TABLE "+e.fences+"_myisam (resource VARBINARY(255) NOT NULL PRIMARY KEY, token BIGINT NOT NULL, updated_at DATETIME(6) NOT NULL) ENGINE=MyISAM")
	err := newGuard(t, e.db, sqlfence.MySQL, sqlfence.WithTable(e.fences+"_myisam")).Migrate(context.Background())
	require.ErrorIs(t, err, sqlfence.ErrUnsafeStorage)
	assert.Contains(t, err.Error(), "MyISAM")
	// A database-qualified name is checked in that database.
	var db string
	require.NoError(t, e.db.QueryRow("SELECT DATABASE()").Scan(&db))
	err = newGuard(t, e.db, sqlfence.MySQL, sqlfence.WithTable(db+"."+e.fences+"_myisam")).Migrate(context.Background())
	require.ErrorIs(t, err, sqlfence.ErrUnsafeStorage)
	require.NoError(t, newGuard(t, e.db, sqlfence.MySQL, sqlfence.WithTable(db+"."+e.fences)).Migrate(context.Background()))
}

// TestMySQLEngineAlteredAfterMigrate: a fence table altered to an engine
// without transactions after Migrate is refused by Do and Check, at a
// Guard's first call and once the Guard's trust in the last check has run
// out; nothing is written. Altered back, it is accepted again.
func TestMySQLEngineAlteredAfterMigrate(t *testing.T) {
	e := setup(t, stores[1])
	ctx := context.Background()
	require.NoError(t, e.g.Do(ctx, "r", 1, e.insert("r", 1, "innodb")))
	// MyISAM (on MySQL and MariaDB alike) keys at most 1000 bytes.
	e.exec(t, "ALTER TABLE "+e.fences+" MODIFY resource VARBINARY(255) NOT NULL, ENGINE=MyISAM")

	fresh := newGuard(t, e.db, sqlfence.MySQL, sqlfence.WithTable(e.fences))
	err := fresh.Do(ctx, "r", 2, e.insert("r", 2, "fresh guard"))
	require.ErrorIs(t, err, sqlfence.ErrUnsafeStorage)
	assert.Contains(t, err.Error(), "MyISAM")
	sqlfence.ExpireStorageCheck(e.g) // as storageRecheck passing would
	require.ErrorIs(t, e.g.Do(ctx, "r", 3, e.insert("r", 3, "old guard")), sqlfence.ErrUnsafeStorage)
	tx, err := e.db.BeginTx(ctx, nil)
	require.NoError(t, err)
	require.ErrorIs(t, e.g.Check(ctx, tx, "r", 4), sqlfence.ErrUnsafeStorage)
	require.NoError(t, tx.Rollback())
	assert.Equal(t, []string{"innodb"}, e.tags(t))
	assert.Equal(t, int64(1), e.fence(t, "r"), "no token recorded")

	e.exec(t, "ALTER TABLE "+e.fences+" ENGINE=InnoDB")
	require.NoError(t, fresh.Do(ctx, "r", 5, e.insert("r", 5, "innodb again")))
	require.NoError(t, e.g.Do(ctx, "r", 5, e.insert("r", 5, "and again")))
}

// TestSQLiteNeedsAFile: Migrate refuses a fence table in a database that
// is not a file, which each connection of a pool would see apart, and
// creates nothing.
func TestSQLiteNeedsAFile(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct{ name, dsn, table string }{
		{"memory", ":memory:", ""},
		{"memory URI", "file::memory:", ""},
		{"shared memory", "file::memory:?cache=shared", ""},
		{"mode=memory", "file:fences34?mode=memory", ""},
		{"mode=memory shared", "file:fences34?mode=memory&cache=shared", ""},
		{"temp schema of a file", testutil.SQLiteDSN(t), "temp.fences"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := openDB(t, "sqlite", tc.dsn)
			var opts []sqlfence.Option
			if tc.table != "" {
				opts = append(opts, sqlfence.WithTable(tc.table))
			}
			g := newGuard(t, db, sqlfence.SQLite, opts...)
			err := g.Migrate(ctx)
			require.ErrorIs(t, err, sqlfence.ErrUnsafeStorage)
			assert.Contains(t, err.Error(), "in-memory")
			assert.NotErrorIs(t, err, sqlfence.ErrInvalid)
			assert.ErrorIs(t, g.Do(ctx, "r", 1, nop), sqlfence.ErrNotMigrated, "Migrate created nothing")
		})
	}
	g := newGuard(t, openDB(t, "sqlite", testutil.SQLiteDSN(t)), sqlfence.SQLite, sqlfence.WithTable("main.fences"))
	require.NoError(t, g.Migrate(ctx), "a file, named by its schema")
}

// TestPostgresSharesFencedTable: a sqlfence Postgres guard and a fenced
// guard over one database use one fence table: each sees the other's
// tokens, and a table protected by fenced accepts sqlfence's writes.
func TestPostgresSharesFencedTable(t *testing.T) {
	e := setup(t, stores[0])
	ctx := context.Background()
	pool := testutil.Postgres(t)
	fg, err := fenced.New(pool, fenced.WithTable(e.fences))
	require.NoError(t, err)
	require.NoError(t, fg.Protect(ctx, e.data, "resource"))

	require.NoError(t, e.g.Do(ctx, "shared", 5, e.insert("shared", 5, "sqlfence")))
	_, err = fg.Raise(ctx, "shared", 7)
	require.NoError(t, err)
	var stale *fenced.StaleTokenError
	require.ErrorAs(t, e.g.Do(ctx, "shared", 6, e.insert("shared", 6, "stale")), &stale)
	assert.Equal(t, int64(7), stale.Highest)
	require.NoError(t, e.g.Do(ctx, "shared", 7, e.insert("shared", 7, "after raise")))

	// Without a token the trigger refuses the write.
	_, err = e.db.Exec(`INSERT INTO ` + e.data + ` (resource, token, tag) VALUES ('shared', 9, 'raw')`)
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "got %v", err)
	assert.Equal(t, fenced.CodeNoToken, pgErr.Code)
	assert.Equal(t, []string{"sqlfence", "after raise"}, e.tags(t))
}
