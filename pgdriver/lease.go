package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/mutex/backend"
)

// statements are the Driver's SQL for its table, built once by New.
type statements struct {
	acquire, release, extend, ttl, abandon, check, lockTx string
}

// The token is the key's last one plus one, and at least the database's
// time in µs: it never goes back, even when the row is lost (a failover to
// a replica that missed it), as long as the database's clock does not.
// Every statement times the lease on clock_timestamp(), the database's
// clock at that statement, never a client's.
func prepare(t, channel string) statements {
	const live = `l.expires_at > clock_timestamp()`
	return statements{
		// ON CONFLICT locks the key's row even when its WHERE refuses the
		// update, so an attempt waits for a transaction that checked the
		// key's hold (Check) instead of taking the key under it.
		acquire: `WITH up AS (
	INSERT INTO ` + t + ` AS l (key, owner, token, count, expires_at, acquired_at, renewed_at)
	VALUES ($1, $2, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 1,
		clock_timestamp() + $3 * interval '1 millisecond', clock_timestamp(), clock_timestamp())
	ON CONFLICT (key) DO UPDATE SET
		token = CASE WHEN l.owner = excluded.owner AND ` + live + ` THEN l.token
			ELSE greatest(l.token + 1, excluded.token) END,
		count = CASE WHEN l.owner = excluded.owner AND ` + live + ` THEN l.count + 1 ELSE 1 END,
		acquired_at = CASE WHEN l.owner = excluded.owner AND ` + live + ` THEN l.acquired_at
			ELSE excluded.acquired_at END,
		owner = excluded.owner,
		expires_at = excluded.expires_at,
		renewed_at = excluded.renewed_at
	WHERE l.owner IS NULL OR NOT (` + live + `) OR l.owner = excluded.owner
	RETURNING l.token, l.count
)
SELECT token, count, 0::bigint FROM up
UNION ALL
SELECT 0, 0, greatest(0, (extract(epoch FROM (l.expires_at - clock_timestamp())) * 1000)::bigint)
FROM ` + t + ` AS l WHERE l.key = $1 AND NOT EXISTS (SELECT 1 FROM up)`,
		// A release that frees the key tells listeners (WithListener), at
		// commit: the payload is the key, unless past NOTIFY's 8000 bytes,
		// whose waiters poll.
		release: `WITH r AS (UPDATE ` + t + ` AS l SET count = l.count - 1,
	owner = CASE WHEN l.count > 1 THEN l.owner END,
	expires_at = CASE WHEN l.count > 1 THEN l.expires_at END
WHERE l.key = $1 AND l.owner = $2 AND l.token = $3 AND ` + live + `
RETURNING l.key, l.count)
SELECT r.count, CASE WHEN r.count = 0 THEN ` + notifyKey(channel, "r.key") + ` END FROM r`,
		extend: `UPDATE ` + t + ` AS l SET expires_at = clock_timestamp() + v.ttl * interval '1 millisecond',
	renewed_at = clock_timestamp()
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS v(key, owner, token, ttl)
WHERE l.key = v.key AND l.owner = v.owner AND l.token = v.token AND ` + live + `
RETURNING l.key, l.token`,
		ttl: `SELECT CASE WHEN l.owner = $2 AND l.token = $3 AND ` + live + `
	THEN (extract(epoch FROM (l.expires_at - clock_timestamp())) * 1000)::bigint ELSE -1 END
FROM ` + t + ` AS l WHERE l.key = $1`,
		abandon: `WITH r AS (UPDATE ` + t + ` AS l SET owner = NULL, count = 0, expires_at = NULL
WHERE l.key = $1 AND l.owner = $2 RETURNING l.key)
SELECT ` + notifyKey(channel, "r.key") + ` FROM r`,
		lockTx: lockTxStatement(t),
		check:  `SELECT 1 FROM ` + t + ` AS l WHERE l.key = $1 AND l.token = $2 AND l.owner IS NOT NULL AND ` + live + ` FOR UPDATE`,
	}
}

// Acquire makes one attempt, in one autocommit statement.
func (d *Driver) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	var token, count, remaining int64
	err := d.db.QueryRow(ctx, d.sql.acquire, a.Key, a.Owner, a.TTL.Milliseconds()).Scan(&token, &count, &remaining)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		// Freed between the insert's conflict and the read: a poll soon.
		return backend.Grant{Status: backend.Held}, nil
	case err != nil:
		return backend.Grant{}, failed("acquire", err)
	case token == 0:
		return backend.Grant{Status: backend.Held, Remaining: time.Duration(remaining) * time.Millisecond}, nil
	case count == 1:
		return backend.Grant{Status: backend.Acquired, Token: token}, nil
	}
	return backend.Grant{Status: backend.Reentered, Token: token}, nil
}

// Release takes one count; -1 when owner and token do not hold the key.
func (d *Driver) Release(ctx context.Context, l backend.Lease) (int64, error) {
	var left int64
	var notified *string
	err := d.db.QueryRow(ctx, d.sql.release, l.Key, l.Owner, l.Token).Scan(&left, &notified)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return -1, nil
	case err != nil:
		return 0, failed("release", err)
	}
	return left, nil
}

// Extend renews every lease in one statement.
func (d *Driver) Extend(ctx context.Context, leases []backend.Lease) ([]backend.Renewal, error) {
	out := make([]backend.Renewal, len(leases))
	// In the keys' byte order, as LockTx locks rows. The join may still
	// visit them otherwise, so a renewal and a LockTx can deadlock when a
	// lease ends inside the statement; PostgreSQL's detector then fails
	// one of them, and a failed renewal is retried.
	keys, owners := make([]string, len(leases)), make([]string, len(leases))
	tokens, ttls := make([]int64, len(leases)), make([]int64, len(leases))
	for i, j := range sortedByKey(leases) {
		l := leases[j]
		keys[i], owners[i], tokens[i], ttls[i] = l.Key, l.Owner, l.Token, l.TTL.Milliseconds()
	}
	rows, err := d.db.Query(ctx, d.sql.extend, keys, owners, tokens, ttls)
	if err != nil {
		return out, failed("extend", err)
	}
	renewed := map[string]int64{}
	for rows.Next() {
		var key string
		var token int64
		if err := rows.Scan(&key, &token); err != nil {
			rows.Close()
			return out, failed("extend", err)
		}
		renewed[key] = token
	}
	if err := rows.Err(); err != nil {
		return out, failed("extend", err)
	}
	for i, l := range leases {
		if t, ok := renewed[l.Key]; ok && t == l.Token {
			out[i] = backend.Renewed
		} else {
			out[i] = backend.Gone
		}
	}
	return out, nil
}

// TTL is the lease left, on the database's clock; negative when owner and
// token do not hold the key.
func (d *Driver) TTL(ctx context.Context, l backend.Lease) (time.Duration, error) {
	var ms int64
	err := d.db.QueryRow(ctx, d.sql.ttl, l.Key, l.Owner, l.Token).Scan(&ms)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return -1, nil
	case err != nil:
		return 0, failed("ttl", err)
	case ms < 0:
		return -1, nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// Abandon frees key if owner holds it, whatever the count.
func (d *Driver) Abandon(ctx context.Context, key, owner string) error {
	rows, err := d.db.Query(ctx, d.sql.abandon, key, owner)
	if err != nil {
		return failed("abandon", err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return failed("abandon", err)
	}
	return nil
}

// Held is what Check needs of a hold: its key and fencing token. A
// *mutex.Lock is one.
type Held interface {
	Key() string
	Token() int64
}

// Check makes tx's writes the hold's: it returns nil when h's lease is
// live and its token is the key's current one, and locks the key's row
// until tx ends, so that no other owner can take the key, and the lease
// cannot be taken over, while tx is open. Otherwise it returns an error
// matching ErrNotHeld, and tx must roll back. Call it first in tx, before
// the writes it guards.
func (d *Driver) Check(ctx context.Context, tx pgx.Tx, h Held) error {
	switch {
	case ctx == nil:
		return invalidf("nil context")
	case tx == nil:
		return invalidf("nil transaction")
	case h == nil:
		return invalidf("nil hold")
	}
	var one int
	err := tx.QueryRow(ctx, d.sql.check, h.Key(), h.Token()).Scan(&one)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w: key %q, token %d", ErrNotHeld, h.Key(), h.Token())
	case err != nil:
		return fmt.Errorf("pgdriver: check: %w", err)
	}
	return nil
}

// sortedByKey is the order of leases by key, byte by byte: the order in
// which LockTx locks rows, and renewals send their keys.
func sortedByKey(leases []backend.Lease) []int {
	order := make([]int, len(leases))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(leases[a].Key, leases[b].Key) })
	return order
}

// failed is a statement's error: the outcome is unknown.
func failed(op string, err error) error {
	return fmt.Errorf("pgdriver: %s: %w: %w", op, backend.ErrUnavailable, err)
}

// notifyKey is the expression that NOTIFYs the Driver's channel of key (an
// SQL expression), at commit; a key past NOTIFY's 8000-byte payload is not
// sent, and its waiters poll.
func notifyKey(channel, key string) string {
	return `CASE WHEN octet_length(` + key + `) < 8000 THEN pg_notify(` + quoteLiteral(channel) + `, ` + key + `)::text END`
}

// quoteLiteral quotes s as an SQL string literal: the channel's name is the
// Driver's own, but a schema may hold a quote.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
