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

// heldMark starts the text whose cast to bigint fails LockTx's statement
// at the first key a live lease holds: plain SQL has no RAISE, and a
// PL/pgSQL function around the statement cost the ledger benchmark a tenth
// of its throughput (bench/README.md). The failure aborts the
// transaction, so nothing after it runs or commits.
const heldMark = "redfence: held by a lease: "

// lockTxStatement raises each key's token and row-locks its lease row, in
// the order of $1, which LockTx sorts into the keys' byte order (the order
// Extend sends its keys in), so that transactions taking overlapping keys
// wait for each other instead of deadlocking. ON CONFLICT locks the row before its SET is
// evaluated: a key that a live lease holds fails the cast there. An
// expired lease's owner is cleared. One upsert and no CTE around it, which
// the ledger benchmark measured faster (bench/README.md).
func lockTxStatement(t string) string {
	return `INSERT INTO ` + t + ` AS l (key, owner, token, count, acquired_at)
SELECT k, NULL, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint, 0, clock_timestamp()
FROM unnest($1::text[]) WITH ORDINALITY AS v(k, i) ORDER BY i
ON CONFLICT (key) DO UPDATE SET token = CASE
		WHEN l.owner IS NULL OR NOT (l.expires_at > clock_timestamp()) THEN greatest(l.token + 1, excluded.token)
		ELSE ('` + heldMark + `' || quote_literal(l.key))::bigint END,
	acquired_at = excluded.acquired_at, owner = NULL, count = 0, expires_at = NULL
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
// error matching mutex.ErrNotAcquired that names it (the first in byte
// order, when a lease holds several), and tx is aborted:
// nothing more runs in it, its Commit rolls back, and it keeps that row
// locked until it ends, which holds up the lease's renewal and release.
// Bad input (nil ctx or tx, no keys, more than 64, an empty
// key, a NUL, more than 4096 bytes) is ErrInvalid, and nothing is sent.
func (d *Driver) LockTx(ctx context.Context, tx pgx.Tx, keys ...string) ([]int64, error) {
	switch {
	case ctx == nil:
		return nil, invalidf("nil context")
	case tx == nil:
		return nil, invalidf("nil transaction")
	}
	if err := lockTxKeys(keys); err != nil {
		return nil, err
	}
	rows, err := tx.Query(ctx, d.sql.lockTx, lockTxOrder(keys))
	return lockTxResult(keys, rows, err)
}

// QueueLockTx queues LockTx's statement in b, which must be empty, so
// that it reaches the server with the statements queued after it in one
// round trip: send b in the transaction (tx.SendBatch), then read the
// lock's Result first. The statements after it run once it holds every
// key, and not at all when it refuses one (the transaction is aborted).
// Keys held for one round trip less are keys other transactions wait for
// less: in the ledger benchmark's transfers this is the difference between
// the lock's throughput and a tenth more (bench/README.md). Bad input is
// ErrInvalid, and nothing is queued.
func (d *Driver) QueueLockTx(b *pgx.Batch, keys ...string) (*TxLock, error) {
	switch {
	case b == nil:
		return nil, invalidf("nil batch")
	case b.Len() != 0:
		return nil, invalidf("a batch of %d statements: the lock must be the first", b.Len())
	}
	if err := lockTxKeys(keys); err != nil {
		return nil, err
	}
	b.Queue(d.sql.lockTx, lockTxOrder(keys))
	return &TxLock{keys: keys}, nil
}

// TxLock is a lock QueueLockTx queued in a batch.
type TxLock struct{ keys []string }

// Result reads the lock's result from br, the results of its batch: the
// tokens in the order of its keys, or LockTx's errors. Call it before
// reading any statement queued after it.
func (l *TxLock) Result(br pgx.BatchResults) ([]int64, error) {
	if br == nil {
		return nil, invalidf("nil batch results")
	}
	rows, err := br.Query()
	return lockTxResult(l.keys, rows, err)
}

// lockTxKeys checks LockTx's keys: what the Locker would refuse, and a NUL,
// which PostgreSQL's text cannot hold.
func lockTxKeys(keys []string) error {
	switch {
	case len(keys) == 0:
		return invalidf("no keys")
	case len(keys) > maxTxKeys:
		return invalidf("%d keys, more than %d", len(keys), maxTxKeys)
	}
	for _, k := range keys {
		switch {
		case k == "":
			return invalidf("empty key")
		case len(k) > maxKeyLen:
			return invalidf("key of %d bytes, more than %d", len(k), maxKeyLen)
		case strings.IndexByte(k, 0) >= 0:
			return invalidf("key %q holds a NUL byte, which PostgreSQL's text cannot", k)
		}
	}
	return nil
}

// lockTxOrder is keys once each, in byte order: ON CONFLICT cannot update
// a row twice, and one order for every transaction keeps them from
// deadlocking.
func lockTxOrder(keys []string) []string {
	return slices.Compact(slices.Sorted(slices.Values(keys)))
}

// lockTxResult reads LockTx's statement's rows: the tokens in keys'
// order, or its error (a refusal is ErrNotAcquired; a serialization
// failure or a deadlock the transaction's to retry; anything else an
// unknown outcome).
func lockTxResult(keys []string, rows pgx.Rows, err error) ([]int64, error) {
	tokens := make(map[string]int64, len(keys))
	if err == nil {
		var key string
		var token int64
		_, err = pgx.ForEachRow(rows, []any{&key, &token}, func() error {
			tokens[key] = token
			return nil
		})
	}
	var pgErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr) && pgErr.Code == "22P02" && strings.Contains(pgErr.Message, heldMark):
		// quote_literal's key ends at its last quote, whatever quotes a
		// translated message puts around it.
		held := pgErr.Message[strings.Index(pgErr.Message, heldMark)+len(heldMark):]
		held = held[:strings.LastIndexByte(held, '\'')+1]
		return nil, fmt.Errorf("%w: held by a lease: %s", backend.ErrNotAcquired, held)
	case errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01"):
		return nil, fmt.Errorf("pgdriver: lock in transaction: %w", err)
	case err != nil:
		return nil, failed("lock in transaction", err)
	}
	out := make([]int64, len(keys))
	for i, k := range keys {
		if out[i] = tokens[k]; out[i] == 0 {
			return nil, failed("lock in transaction", fmt.Errorf("no token for %q", k))
		}
	}
	return out, nil
}
