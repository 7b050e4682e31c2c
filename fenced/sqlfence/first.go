package sqlfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/internal/pgfence"
	"github.com/redfence/redfence/internal/pgfirst"
)

// firstSQL is what Check sends, before the fence, to tell whether its
// transaction read something that the resource's previous holder may
// have changed since (see Check).
type firstSQL struct {
	// Postgres: whether the transaction holds a read lock (pgfirst).
	readBefore string
	table      string // its argument: the fence table, quoted
	// MySQL: lock locks the resource's fence row (inserting it if missing)
	// without changing it; compare reads it as committed (a locking read)
	// and in the transaction's snapshot, which a read before Check took,
	// and which otherwise is taken now, under the lock.
	lock, compare string
}

func (d Dialect) firstSQL(parts []string) firstSQL {
	switch d {
	case Postgres:
		return firstSQL{readBefore: pgfirst.ReadBefore, table: pgfence.Quote(parts...)}
	case MySQL:
		table := quoteWith("`", parts)
		// "token = token" changes nothing, so the row gets no new version
		// that the snapshot would see as the transaction's own. The row is
		// compared whole: an equal token rewrites updated_at.
		row := `(SELECT CONCAT(token, '/', updated_at) FROM ` + table + ` WHERE resource = ?`
		return firstSQL{
			lock:    `INSERT INTO ` + table + ` (resource, token, updated_at) VALUES (?, ?, UTC_TIMESTAMP(6)) ON DUPLICATE KEY UPDATE token = token`,
			compare: `SELECT ` + row + ` FOR UPDATE), ` + row + `)`,
		}
	}
	return firstSQL{} // SQLite: a read before Check keeps it from the write lock (see Check)
}

// readFirst returns an error matching ErrCheckNotFirst when tx read, before
// Check, what a write committed since may have changed. On MySQL it leaves
// the fence row locked, as the fence would.
func (g *Guard) readFirst(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
	var stale bool
	var err error
	switch g.dialect {
	case Postgres:
		err = tx.QueryRowContext(ctx, g.first.readBefore, g.first.table).Scan(&stale)
	case MySQL:
		stale, err = g.mysqlSnapshotStale(ctx, tx, resource, token)
	}
	switch {
	case stale:
		return fmt.Errorf("%w: check %q: the transaction read before it", ErrCheckNotFirst, fence.Clip(resource))
	case err == nil:
		return nil
	case g.dialect.notMigrated(err):
		return fmt.Errorf("%w: %s: %w", ErrNotMigrated, fence.Clip(g.table), err)
	case mysqlNumber(err) == 1020: // ER_CHECKREAD: MariaDB's innodb_snapshot_isolation saw it first
		return fmt.Errorf("%w: check %q: %w", ErrCheckNotFirst, fence.Clip(resource), err)
	}
	return fmt.Errorf("sqlfence: check %q: %w", fence.Clip(resource), err)
}

// mysqlSnapshotStale reports whether the fence row as committed differs
// from the row in tx's snapshot: then a writer of the resource committed
// after the snapshot was taken, by a read before Check (at REPEATABLE
// READ, InnoDB's default; READ COMMITTED takes a snapshot per statement,
// and so shows nothing).
func (g *Guard) mysqlSnapshotStale(ctx context.Context, tx *sql.Tx, resource string, token int64) (bool, error) {
	if _, err := tx.ExecContext(ctx, g.first.lock, resource, token); err != nil {
		return false, err
	}
	var latest, snapshot sql.NullString // snapshot: NULL when inserted after it
	err := tx.QueryRowContext(ctx, g.first.compare, resource, resource).Scan(&latest, &snapshot)
	return latest != snapshot, err
}
