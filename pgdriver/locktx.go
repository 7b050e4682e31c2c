package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redfence/redfence/mutex/backend"
)

// The Locker's limits (mutex.MaxKeyLen, mutex.MaxKeys), which a driver
// cannot import.
const (
	maxKeyLen = 4096
	maxTxKeys = 64
)

// lockTxStatement raises each free key's token and row-locks its lease
// row, in the keys' byte order (COLLATE "C", the order Extend sends its
// keys in), so that transactions taking overlapping keys, and a Locker's
// renewal of several, wait for each other instead of deadlocking. ON
// CONFLICT locks a row its WHERE refuses too: a key that a live lease holds
// is row-locked and not returned. An expired lease's owner is cleared.
func lockTxStatement(t string) string {
	return `INSERT INTO ` + t + ` AS l (key, owner, token, count, acquired_at)
SELECT k, NULL, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 0, clock_timestamp()
FROM (SELECT DISTINCT unnest($1::text[]) AS k) AS v ORDER BY k COLLATE "C"
ON CONFLICT (key) DO UPDATE SET token = greatest(l.token + 1, excluded.token),
	acquired_at = excluded.acquired_at, owner = NULL, count = 0, expires_at = NULL
WHERE l.owner IS NULL OR NOT (l.expires_at > clock_timestamp())
RETURNING l.key, l.token`
}

// LockTx locks keys for the life of tx, in one statement: it gives each key
// a new fencing token (above every earlier one, the Locker's included) and
// row-locks its lease row until tx commits or rolls back, when the keys are
// free again with nothing to release. Until then a Locker's Acquire of one
// of them, and another LockTx, wait for tx. It returns the tokens in the
// order of keys. For a write that fits in one transaction this is the
// lock and its check at the cost of one statement; for work that outlives
// a transaction, or must know when the lock is lost, use the Locker and
// Check.
//
// The tokens are the transaction's: if tx rolls back, a later holder may
// be given the same value, so use them for tx's own writes (a fence it
// writes, a column). Call it once, first in tx, at READ COMMITTED (the
// default): at REPEATABLE READ or SERIALIZABLE a key changed since tx's
// snapshot fails it with PostgreSQL's serialization error, and row locks
// taken before it can deadlock; both are returned as pgx's error, not as
// ErrUnavailable: retry the transaction. Its holds are not a Locker's:
// Inspect, List and the debug page show the keys free, and ForceRelease
// cannot end them (end tx).
//
// A key that a Locker's live lease holds is not taken: LockTx returns an
// error matching mutex.ErrNotAcquired that names it, and tx must roll back
// (it keeps that row locked until then, which holds up the lease's renewal
// and release). Bad input (nil ctx or tx, no keys, more than 64, an empty
// key, a NUL, more than 4096 bytes) is ErrInvalid, and nothing is sent.
func (d *Driver) LockTx(ctx context.Context, tx pgx.Tx, keys ...string) ([]int64, error) {
	switch {
	case ctx == nil:
		return nil, invalidf("nil context")
	case tx == nil:
		return nil, invalidf("nil transaction")
	case len(keys) == 0:
		return nil, invalidf("no keys")
	case len(keys) > maxTxKeys:
		return nil, invalidf("%d keys, more than %d", len(keys), maxTxKeys)
	}
	for _, k := range keys {
		switch {
		case k == "":
			return nil, invalidf("empty key")
		case len(k) > maxKeyLen:
			return nil, invalidf("key of %d bytes, more than %d", len(k), maxKeyLen)
		case strings.IndexByte(k, 0) >= 0:
			return nil, invalidf("key %q holds a NUL byte, which PostgreSQL's text cannot", k)
		}
	}
	rows, err := tx.Query(ctx, d.sql.lockTx, keys)
	if err != nil {
		return nil, lockTxFailed(err)
	}
	tokens := make(map[string]int64, len(keys))
	var key string
	var token int64
	_, err = pgx.ForEachRow(rows, []any{&key, &token}, func() error {
		tokens[key] = token
		return nil
	})
	if err != nil {
		return nil, lockTxFailed(err)
	}
	out := make([]int64, len(keys))
	var held []string
	for i, k := range keys {
		if out[i] = tokens[k]; out[i] == 0 && !slices.Contains(held, k) {
			held = append(held, k)
		}
	}
	if held != nil {
		return nil, fmt.Errorf("%w: %q held by a lease", backend.ErrNotAcquired, held)
	}
	return out, nil
}

// lockTxFailed is a failed LockTx statement: a serialization failure or a
// deadlock is the transaction's to retry, anything else an unknown outcome.
func lockTxFailed(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01") {
		return fmt.Errorf("pgdriver: lock in transaction: %w", err)
	}
	return failed("lock in transaction", err)
}
