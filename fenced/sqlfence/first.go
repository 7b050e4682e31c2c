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
// Check or CheckAll, what a write committed since may have changed. On
// MySQL it leaves the claims' fence rows locked, as the fence would.
func (g *Guard) readFirst(ctx context.Context, tx *sql.Tx, claims []Claim) error {
	var stale string // the resource found stale
	var err error
	switch g.dialect {
	case Postgres:
		var read bool
		err = tx.QueryRowContext(ctx, g.first.readBefore, g.first.table).Scan(&read)
		if read {
			stale = fence.Names(claims)
		}
	case MySQL:
		stale, err = g.mysqlSnapshotStale(ctx, tx, claims)
	}
	switch {
	case stale != "":
		return fmt.Errorf("%w: check %s: the transaction read before it", ErrCheckNotFirst, stale)
	case err == nil:
		return nil
	case g.dialect.notMigrated(err):
		return fmt.Errorf("%w: %s: %w", ErrNotMigrated, fence.Clip(g.table), err)
	case mysqlNumber(err) == 1020: // ER_CHECKREAD: MariaDB's innodb_snapshot_isolation saw it first
		return fmt.Errorf("%w: check %s: %w", ErrCheckNotFirst, fence.Names(claims), err)
	}
	return fmt.Errorf("sqlfence: check %s: %w", fence.Names(claims), err)
}

// mysqlSnapshotStale returns the first resource, quoted, whose fence row as
// committed differs from the row in tx's snapshot, or "": then a writer of
// the resource committed after the snapshot was taken, by a read before
// Check (at REPEATABLE READ, InnoDB's default; READ COMMITTED takes a
// snapshot per statement, and so shows nothing). Every row is locked, in
// claims' order, before the first comparison: when no read came before,
// that comparison takes the snapshot, after every writer it waited for
// has committed, and a later writer cannot commit before tx ends.
func (g *Guard) mysqlSnapshotStale(ctx context.Context, tx *sql.Tx, claims []Claim) (string, error) {
	for _, c := range claims {
		if _, err := tx.ExecContext(ctx, g.first.lock, c.Resource, c.Token); err != nil {
			return "", err
		}
	}
	for _, c := range claims {
		var latest, snapshot sql.NullString // snapshot: NULL when inserted after it
		if err := tx.QueryRowContext(ctx, g.first.compare, c.Resource, c.Resource).Scan(&latest, &snapshot); err != nil {
			return "", err
		}
		if latest != snapshot {
			return fmt.Sprintf("%q", fence.Clip(c.Resource)), nil
		}
	}
	return "", nil
}
