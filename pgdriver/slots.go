package pgdriver

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/mutex/backend"
)

// SlotsTable and RecordsTable keep package runner's slot claims and run
// records, beside the lease table in its schema.
const (
	SlotsTable   = "redfence_slots"
	RecordsTable = "redfence_records"
)

var (
	_ backend.SlotClaimer = (*Driver)(nil)
	_ backend.ServerClock = (*Driver)(nil)
)

// slotStatements are the Driver's SQL for the runner's tables.
type slotStatements struct {
	claim, put, get string
}

// prepareSlots builds the runner's statements over the tables slots and
// records. A claim is one statement timed on the database's clock: the
// upsert row-locks the key's claim, so two replicas' claims of one slot
// are decided one after the other, and a retry by the same claimer finds
// its own claim.
func prepareSlots(slots, records string) slotStatements {
	return slotStatements{
		claim: `WITH up AS (
	INSERT INTO ` + slots + ` AS s (key, slot, claimer, kept_until, gap_until)
	VALUES ($1, $2, $3, clock_timestamp() + $4 * interval '1 millisecond',
		clock_timestamp() + $5 * interval '1 millisecond')
	ON CONFLICT (key) DO UPDATE SET slot = excluded.slot, claimer = excluded.claimer,
		kept_until = excluded.kept_until, gap_until = excluded.gap_until
	WHERE s.gap_until <= clock_timestamp()
		AND (s.slot < excluded.slot OR s.kept_until <= clock_timestamp())
	RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM up) OR EXISTS (
	SELECT 1 FROM ` + slots + ` AS s WHERE s.key = $1 AND s.slot = $2 AND s.claimer = $3
		AND s.kept_until > clock_timestamp())`,
		put: `INSERT INTO ` + records + ` AS r (key, value, expires_at)
VALUES ($1, $2, clock_timestamp() + $3 * interval '1 millisecond')
ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at`,
		get: `SELECT value FROM ` + records + ` WHERE key = $1 AND expires_at > clock_timestamp()`,
	}
}

// slotTables is what Migrate creates for the runner.
func slotTables(slots, records string) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + slots + ` (
	key        text PRIMARY KEY,
	slot       bigint NOT NULL,
	claimer    text NOT NULL,
	kept_until timestamptz NOT NULL,
	gap_until  timestamptz NOT NULL
)`,
		`CREATE TABLE IF NOT EXISTS ` + records + ` (
	key        text PRIMARY KEY,
	value      bytea NOT NULL,
	expires_at timestamptz NOT NULL
)`,
	}
}

// ClaimSlot claims c.Slot of c.Key unless a slot at or above it is kept,
// or c.Key's last claim's gap has not passed, both on the database's clock.
func (d *Driver) ClaimSlot(ctx context.Context, c backend.SlotClaim) (bool, error) {
	switch {
	case ctx == nil:
		return false, invalidf("nil context")
	case c.Key == "", c.Claimer == "", c.TTL <= 0, c.Gap < 0:
		return false, invalidf("slot claim: a key, a claimer, a positive TTL and a gap not negative")
	}
	var claimed bool
	err := d.db.QueryRow(ctx, d.slots.claim, c.Key, c.Slot, c.Claimer, ceilMillis(c.TTL), ceilMillis(c.Gap)).Scan(&claimed)
	if err != nil {
		return false, failed("claim slot", err)
	}
	return claimed, nil
}

// PutRecord stores value under key for at least ttl.
func (d *Driver) PutRecord(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	switch {
	case ctx == nil:
		return invalidf("nil context")
	case key == "", ttl <= 0:
		return invalidf("record: a key and a positive TTL")
	}
	if value == nil {
		value = []byte{}
	}
	if _, err := d.db.Exec(ctx, d.slots.put, key, value, ceilMillis(ttl)); err != nil {
		return failed("put record", err)
	}
	return nil
}

// GetRecord returns what PutRecord last stored under key, unless expired.
func (d *Driver) GetRecord(ctx context.Context, key string) ([]byte, bool, error) {
	if ctx == nil {
		return nil, false, invalidf("nil context")
	}
	var value []byte
	err := d.db.QueryRow(ctx, d.slots.get, key).Scan(&value)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, failed("get record", err)
	}
	return value, true, nil
}

// ServerTime is the database's clock_timestamp(), on which the runner
// counts its slots.
func (d *Driver) ServerTime(ctx context.Context) (time.Time, error) {
	if ctx == nil {
		return time.Time{}, invalidf("nil context")
	}
	var now time.Time
	if err := d.db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&now); err != nil {
		return time.Time{}, failed("server time", err)
	}
	return now, nil
}

// ceilMillis rounds d up to whole milliseconds: a claim is kept, and its
// gap lasts, never less than asked.
func ceilMillis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
