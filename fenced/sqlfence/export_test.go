package sqlfence

import (
	"context"
	"database/sql"
	"errors"

	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/internal/pgfence"
)

// WithoutRowLock returns a copy of g whose check is broken on purpose: it
// reads the highest token with a plain SELECT, which locks nothing, and
// then writes the token unconditionally. A writer that read before another
// committed a higher token then commits behind it. The concurrency test
// must catch this; the mutation test asserts that it does.
func WithoutRowLock(g *Guard) *Guard {
	m := *g
	parts, _ := fence.SplitTable(g.table)
	var table, write string
	switch g.dialect {
	case Postgres:
		table = pgfence.Quote(parts...)
		write = `INSERT INTO ` + table + ` (resource, token) VALUES ($1, $2) ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token`
	case MySQL:
		table = quoteWith("`", parts)
		write = `INSERT INTO ` + table + ` (resource, token, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE token = VALUES(token)`
	case SQLite:
		table = quoteWith(`"`, parts)
		write = `INSERT INTO ` + table + ` (resource, token) VALUES (?, ?) ON CONFLICT (resource) DO UPDATE SET token = excluded.token`
	}
	read := `SELECT token FROM ` + table + ` WHERE resource = ?`
	if g.dialect == Postgres {
		read = pgfence.Highest(table)
	}
	m.record = func(ctx context.Context, tx *sql.Tx, resource string, token int64) (int64, error) {
		highest := int64(-1)
		err := tx.QueryRowContext(ctx, read, resource).Scan(&highest)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
		if token < highest {
			return highest, nil
		}
		_, err = tx.ExecContext(ctx, write, resource, token)
		return token, err
	}
	return &m
}

// ExpireStorageCheck makes g's next Do or Check read the fence table's
// storage again: it moves g's clock storageRecheck on. Not for concurrent
// use.
func ExpireStorageCheck(g *Guard) { g.storage.born = g.storage.born.Add(-storageRecheck) }
