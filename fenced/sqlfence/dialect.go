package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/internal/pgfence"
)

// A Dialect says which database the *sql.DB given to New talks to, and so
// which SQL the Guard sends. The package doc says what each assumes.
type Dialect int

const (
	// Postgres is PostgreSQL through pgx's database/sql driver
	// (github.com/jackc/pgx/v5/stdlib). It sends fenced's SQL and shares
	// fenced's fence table.
	Postgres Dialect = iota + 1
	// MySQL is MySQL 8.0.16 (which enforces CHECK) or MariaDB 10.11 and later, InnoDB tables, through
	// github.com/go-sql-driver/mysql.
	MySQL
	// SQLite is SQLite 3.35 or later (RETURNING), through modernc.org/sqlite.
	SQLite
)

func (d Dialect) String() string {
	switch d {
	case Postgres:
		return "Postgres"
	case MySQL:
		return "MySQL"
	case SQLite:
		return "SQLite"
	}
	return "Dialect(" + strconv.Itoa(int(d)) + ")"
}

// statements is the SQL a Guard sends, built once by New.
type statements struct {
	migrate []string // Migrate's, in one transaction
	upsert  string   // records the token unless a higher one is; locks the row
	highest string   // the recorded token, read after upsert under its lock
	// storage reads what the fence table is stored in (MySQL: its engine;
	// SQLite: its database's file), with storageArgs, for safeStorage.
	storage     string
	storageArgs []any
}

// statements builds d's SQL for the fence table named name, split into
// parts by fence.SplitTable.
func (d Dialect) statements(name string, parts []string) statements {
	switch d {
	case Postgres:
		table := pgfence.Quote(parts...)
		return statements{
			migrate: []string{pgfence.MigrateLock, pgfence.Create(table)},
			upsert:  pgfence.Upsert(table),
			highest: pgfence.Highest(table),
		}
	case MySQL:
		table := quoteWith("`", parts)
		engineArgs := []any{nil, parts[0]}
		if len(parts) == 2 {
			engineArgs = []any{parts[0], parts[1]}
		}
		// VARBINARY(1024): MaxResourceLen bytes, under InnoDB's 3072-byte key
		// limit (a utf8mb4 VARCHAR(1024) would need 4096). Bytes compare as
		// bytes, as PostgreSQL's and SQLite's keys do.
		//
		// The SET clauses run left to right: updated_at's IF reads the token
		// before it is raised. GREATEST keeps the higher token; the row is
		// locked whether or not it changes. The token is passed again rather
		// than read with VALUES(), which MySQL 8 deprecates and MariaDB's
		// replacement syntax lacks.
		return statements{
			migrate: []string{`CREATE TABLE IF NOT EXISTS ` + table + ` (
	resource   VARBINARY(1024) NOT NULL PRIMARY KEY,
	token      BIGINT          NOT NULL CHECK (token >= 0),
	updated_at DATETIME(6)     NOT NULL
) ENGINE=InnoDB`},
			upsert: `INSERT INTO ` + table + ` (resource, token, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6))
ON DUPLICATE KEY UPDATE updated_at = IF(token <= ?, UTC_TIMESTAMP(6), updated_at), token = GREATEST(token, ?)`,
			highest:     `SELECT token FROM ` + table + ` WHERE resource = ? FOR UPDATE`,
			storage:     `SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = COALESCE(?, DATABASE()) AND TABLE_NAME = ?`,
			storageArgs: engineArgs,
		}
	case SQLite:
		table := quoteWith(`"`, parts)
		schema := "main"
		if len(parts) == 2 {
			schema = parts[0]
		}
		const now = `strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`
		return statements{
			migrate: []string{`CREATE TABLE IF NOT EXISTS ` + table + ` (
	resource   TEXT    NOT NULL PRIMARY KEY,
	token      INTEGER NOT NULL CHECK (token >= 0),
	updated_at TEXT    NOT NULL DEFAULT (` + now + `)
)`},
			upsert: `INSERT INTO ` + table + ` (resource, token) VALUES (?, ?)
ON CONFLICT (resource) DO UPDATE SET token = excluded.token, updated_at = ` + now + `
WHERE token <= excluded.token
RETURNING token`,
			highest: `SELECT token FROM ` + table + ` WHERE resource = ?`,
			// An in-memory or temporary database has no file name.
			storage:     `SELECT file FROM pragma_database_list WHERE name = ? COLLATE NOCASE`,
			storageArgs: []any{schema},
		}
	}
	return statements{}
}

// quoteWith quotes each part as an identifier between q, doubling q inside.
func quoteWith(q string, parts []string) string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = q + strings.ReplaceAll(p, q, q+q) + q
	}
	return strings.Join(out, ".")
}

// record runs st's upsert for resource and token in tx and returns the
// highest token recorded for resource, token itself when it was recorded.
// Errors come back as the driver returned them.
func (d Dialect) record(ctx context.Context, tx *sql.Tx, st *statements, resource string, token int64) (int64, error) {
	var highest int64
	switch d {
	case Postgres:
		var declared string
		err := tx.QueryRowContext(ctx, st.upsert, resource, token).Scan(&highest, &declared)
		if !errors.Is(err, sql.ErrNoRows) {
			return highest, err
		}
	case SQLite:
		err := tx.QueryRowContext(ctx, st.upsert, resource, token).Scan(&highest)
		if !errors.Is(err, sql.ErrNoRows) {
			return highest, err
		}
	case MySQL:
		res, err := tx.ExecContext(ctx, st.upsert, resource, token, token, token)
		if err != nil {
			return 0, err
		}
		// 2 rows affected: an existing row was changed, which the upsert
		// does only for a token not lower than the recorded one. Otherwise
		// (inserted, unchanged, or 1 for either under the DSN's
		// clientFoundRows) read the token under the lock the upsert holds.
		if n, err := res.RowsAffected(); err == nil && n == 2 {
			return token, nil
		}
	}
	// No row returned, or MySQL's unclear count: a higher token may be
	// recorded; the row is ours until the transaction ends.
	err := tx.QueryRowContext(ctx, st.highest, resource).Scan(&highest)
	return highest, err
}

// safeStorage returns nil when what st.storage read of the fence table can
// fence writers, and otherwise an error matching ErrUnsafeStorage that says
// why. table is the name as configured, for the message.
func (d Dialect) safeStorage(table, storage string) error {
	switch {
	case d == MySQL && storage != "InnoDB":
		return fmt.Errorf("%w: fence table %s uses the %s engine; the fence needs InnoDB's row locks and transactions",
			ErrUnsafeStorage, fence.Clip(table), storage)
	case d == SQLite && storage == "":
		return fmt.Errorf("%w: fence table %s is in an in-memory or temporary database, which each connection sees apart "+
			"(or, shared, locks a table, not the database): open a file", ErrUnsafeStorage, fence.Clip(table))
	}
	return nil
}

// notMigrated reports whether err, from a statement that names only the
// fence table, says that the table does not exist. The drivers are not
// imported (a user compiles only the one they open), so their errors are
// recognised by shape: PostgreSQL's SQLSTATE, MySQL's error number, and
// SQLite's message (its code, SQLITE_ERROR, says no more).
func (d Dialect) notMigrated(err error) bool {
	switch d {
	case Postgres:
		var s interface{ SQLState() string }
		return errors.As(err, &s) && s.SQLState() == pgfence.UndefinedTable
	case MySQL:
		return mysqlNumber(err) == 1146 // ER_NO_SUCH_TABLE
	case SQLite:
		return err != nil && strings.Contains(err.Error(), "no such table")
	}
	return false
}

// mysqlNumber is the Number of a *mysql.MySQLError in err's chain, or 0.
func mysqlNumber(err error) uint64 {
	for err != nil {
		if v := reflect.ValueOf(err); v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
			if f := v.Elem().FieldByName("Number"); f.IsValid() && f.Kind() == reflect.Uint16 {
				return f.Uint()
			}
		}
		err = errors.Unwrap(err)
	}
	return 0
}
