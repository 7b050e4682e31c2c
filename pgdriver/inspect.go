package pgdriver

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/mutex/backend"
)

// ForcedTable keeps the audit records of forced releases, beside the lease
// table in its schema; Inspect shows a key's latest few.
const ForcedTable = "redfence_forced"

// forcedShown is how many of a key's forced releases Inspect returns.
const forcedShown = 10

var _ backend.Inspector = (*Driver)(nil)

// inspectStatements are the Driver's SQL for operators.
type inspectStatements struct {
	inspect, forced, list, force string
}

// A key's state reads the lease on the database's clock, read once per
// statement (the CTE c) so that a key shown held has time left and every
// key of a page is seen at one moment; a lease that ran out is a free key
// that keeps its last token.
const keyColumns = `CASE WHEN l.expires_at > c.now THEN coalesce(l.owner, '') ELSE '' END,
	coalesce(l.token, 0), coalesce(l.count, 0),
	CASE WHEN l.expires_at > c.now
		THEN (extract(epoch FROM (l.expires_at - c.now)) * 1000000)::bigint ELSE 0 END,
	l.acquired_at, l.renewed_at, c.now`

// clockCTE is keyColumns' c.
const clockCTE = `WITH c AS MATERIALIZED (SELECT clock_timestamp() AS now) `

func prepareInspect(locks, forced, channel string) inspectStatements {
	return inspectStatements{
		// The join returns a row for a key the table lacks too: a free
		// key, at the database's time.
		inspect: clockCTE + `SELECT $1::text, ` + keyColumns + ` FROM c LEFT JOIN ` + locks + ` AS l ON l.key = $1`,
		forced: `SELECT id, at, by, reason, token, floor, owner, count FROM ` + forced + `
WHERE key = $1 ORDER BY id DESC LIMIT ` + strconv.Itoa(forcedShown),
		list: clockCTE + `SELECT l.key, ` + keyColumns + ` FROM c, ` + locks + ` AS l WHERE l.key > $1 ORDER BY l.key LIMIT $2`,
		// The old row is read FOR UPDATE, so the holder it ends is the one
		// the record names; the row keeps its token, so every later
		// token exceeds it (the floor, token + 1).
		force: `WITH old AS (
	SELECT key, owner, token, count FROM ` + locks + `
	WHERE key = $1 AND owner IS NOT NULL AND expires_at > clock_timestamp() AND ($2::bigint = 0 OR token = $2)
	FOR UPDATE
), freed AS (
	UPDATE ` + locks + ` AS l SET owner = NULL, count = 0, expires_at = NULL FROM old
	WHERE l.key = old.key RETURNING old.owner, old.token, old.count
), rec AS (
	INSERT INTO ` + forced + ` (key, at, by, reason, token, floor, owner, count)
	SELECT $1, clock_timestamp(), $3, $4, token, token + 1, owner, count FROM freed
)
SELECT true, owner, token, count,
	` + notifyKey(channel, "$1") + `
FROM freed
UNION ALL
SELECT false, '', l.token, 0, NULL FROM ` + locks + ` AS l
WHERE l.key = $1 AND l.owner IS NOT NULL AND l.expires_at > clock_timestamp() AND NOT EXISTS (SELECT 1 FROM freed)`,
	}
}

// forcedTable is what Migrate creates for the audit records.
func forcedTable(forced string) string {
	return `CREATE TABLE IF NOT EXISTS ` + forced + ` (
	id     bigserial PRIMARY KEY,
	key    text NOT NULL,
	at     timestamptz NOT NULL,
	by     text NOT NULL,
	reason text NOT NULL,
	token  bigint NOT NULL,
	floor  bigint NOT NULL,
	owner  text NOT NULL,
	count  bigint NOT NULL
)`
}

// scanKey reads one row: the key, then keyColumns.
func scanKey(row pgx.Row) (backend.KeyState, error) {
	var ks backend.KeyState
	var count, leaseUS int64
	var acquired, renewed *time.Time
	if err := row.Scan(&ks.Key, &ks.Owner, &ks.Token, &count, &leaseUS, &acquired, &renewed, &ks.Now); err != nil {
		return ks, err
	}
	if ks.Owner != "" {
		ks.Count = int(count)
		ks.Lease = time.Duration(leaseUS) * time.Microsecond
		if acquired != nil && renewed != nil {
			ks.AcquiredAt, ks.RenewedAt = *acquired, *renewed
		}
	}
	return ks, nil
}

// Inspect returns key's lease as the database holds it, and its latest
// forced releases, changing nothing.
func (d *Driver) Inspect(ctx context.Context, key string) (backend.KeyState, error) {
	if ctx == nil {
		return backend.KeyState{}, invalidf("nil context")
	}
	ks, err := scanKey(d.db.QueryRow(ctx, d.inspect.inspect, key))
	if err != nil {
		return backend.KeyState{}, failed("inspect", err)
	}
	rows, err := d.db.Query(ctx, d.inspect.forced, key)
	if err != nil {
		return backend.KeyState{}, failed("inspect", err)
	}
	ks.Forced, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend.ForceRecord, error) {
		var f backend.ForceRecord
		var id, count int64
		err := r.Scan(&id, &f.At, &f.By, &f.Reason, &f.Token, &f.Floor, &f.Owner, &count)
		f.ID, f.Count = strconv.FormatInt(id, 10), int(count)
		return f, err
	})
	if err != nil {
		return backend.KeyState{}, failed("inspect", err)
	}
	return ks, nil
}

// cursorPrefix marks the cursors List hands out: the last key it returned.
const cursorPrefix = "pg:"

// List returns the lease table's keys in key order, r.Count per statement
// and at most r.Scans statements, from r.Cursor on. r.Match is left to the
// Locker: the keys are read in order, none passed over.
func (d *Driver) List(ctx context.Context, r backend.ListRequest) (backend.ListPage, error) {
	if ctx == nil {
		return backend.ListPage{}, invalidf("nil context")
	}
	after := ""
	if r.Cursor != "" {
		var ok bool
		if after, ok = strings.CutPrefix(r.Cursor, cursorPrefix); !ok {
			return backend.ListPage{}, backend.ErrBadCursor
		}
	}
	count, scans := max(r.Count, 1), max(r.Scans, 1)
	var page backend.ListPage
	for range scans {
		rows, err := d.db.Query(ctx, d.inspect.list, after, count)
		if err != nil {
			return backend.ListPage{}, failed("list", err)
		}
		keys, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (backend.KeyState, error) { return scanKey(r) })
		if err != nil {
			return backend.ListPage{}, failed("list", err)
		}
		page.RoundTrips++
		page.Keys = append(page.Keys, keys...)
		if len(keys) < count {
			return page, nil // the whole table was read: no cursor
		}
		after = keys[len(keys)-1].Key
		if r.Limit > 0 && len(page.Keys) >= r.Limit {
			break
		}
	}
	page.Cursor = cursorPrefix + after
	return page, nil
}

// ForceRelease frees key when it is held under f.Token (0: whoever holds
// it), whatever its count, in one statement: the row keeps its token, so
// every later token exceeds the floor; the holder's Release and Extend
// find it gone; waiters are notified; the record stays in ForcedTable.
func (d *Driver) ForceRelease(ctx context.Context, key string, f backend.Force) (backend.Forced, error) {
	if ctx == nil {
		return backend.Forced{}, invalidf("nil context")
	}
	var out backend.Forced
	var count int64
	var notified *string
	err := d.db.QueryRow(ctx, d.inspect.force, key, f.Token, f.By, f.Reason).Scan(&out.Released, &out.Owner, &out.Token, &count, &notified)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return backend.Forced{}, nil // nobody holds it
	case err != nil:
		return backend.Forced{}, failed("force release", err)
	}
	if !out.Released {
		return backend.Forced{Token: out.Token}, nil
	}
	out.Count, out.Floor, out.Servers = int(count), out.Token+1, 1
	return out, nil
}
