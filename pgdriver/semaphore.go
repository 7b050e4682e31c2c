package pgdriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redfence/redfence/mutex/backend"
)

// SemaphoresTable keeps each semaphore's limit and last token, and
// PermitsTable its holders, one row each, beside the lease table in its
// schema.
const (
	SemaphoresTable = "redfence_semaphores"
	PermitsTable    = "redfence_permits"
)

var _ backend.Semaphorer = (*Driver)(nil)

// semStatements are the Driver's SQL for semaphores. Acquire, release and
// extend are PL/pgSQL functions (Migrate creates them) called in one
// autocommit statement: each locks the semaphore's row first and then,
// as every statement of a function at READ COMMITTED takes a new
// snapshot, reads the holders the previous lock holder committed. One SQL
// statement could not: its snapshot is taken before it waits for the row.
type semStatements struct {
	acquire, release, extend, limit, inspect string
}

// semFuncs are the functions' quoted, schema-qualified names.
type semFuncs struct{ acquire, release, extend string }

// forgetAfter is how long a semaphore's stored limit outlives its last use
// when no permit is held; the next attempt's limit is stored then, as
// when a Redis semaphore's keys expire. Its last token is kept for ever.
const forgetAfter = `interval '1 hour'`

func prepareSemaphores(sems, permits string, f semFuncs, channel string) semStatements {
	live := `p.expires_at > clock_timestamp()`
	return semStatements{
		acquire: `SELECT * FROM ` + f.acquire + `($1, $2, $3, $4)`,
		release: `SELECT ` + f.release + `($1, $2, $3)`,
		extend: `SELECT v.i, ` + f.extend + `(v.k, v.o, v.t, v.ttl)
FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS v(k, o, t, ttl, i)`,
		limit: `WITH up AS (
	INSERT INTO ` + sems + ` AS s (key, lim, token, used_at) VALUES ($1, $2, 0, clock_timestamp())
	ON CONFLICT (key) DO UPDATE SET lim = excluded.lim, used_at = excluded.used_at
	RETURNING s.key
)
SELECT ` + notifyKey(channel, `'`+semPrefix+`' || up.key`) + ` FROM up`,
		inspect: `SELECT CASE WHEN s.used_at > clock_timestamp() - ` + forgetAfter + ` OR p.owner IS NOT NULL
		THEN s.lim ELSE 0 END,
	p.owner, coalesce(p.token, 0),
	coalesce(ceil(extract(epoch FROM (p.expires_at - clock_timestamp())) * 1000)::bigint, 0)
FROM ` + sems + ` AS s LEFT JOIN ` + permits + ` AS p ON p.key = s.key AND ` + live + `
WHERE s.key = $1 ORDER BY p.token`,
	}
}

// semPrefix starts a semaphore's NOTIFY payload, so that its waiters and a
// lock's of the same name hear each other's releases only by a chance a
// key shares (a spurious wake-up, which costs one attempt).
const semPrefix = "\x1fs"

// semaphoreTables is what Migrate creates for semaphores: the tables and
// the functions over them (CREATE OR REPLACE: a later version that changes
// a function's meaning must rename it).
func semaphoreTables(sems, permits string, f semFuncs, channel string) []string {
	notify := `PERFORM ` + notifyKey(channel, `'`+semPrefix+`' || p_key`) + `;`
	reclaim := `DELETE FROM ` + permits + ` AS p WHERE p.key = p_key AND p.expires_at <= clock_timestamp();`
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + sems + ` (
	key     text PRIMARY KEY,
	lim     integer NOT NULL CHECK (lim > 0),
	token   bigint NOT NULL,      -- the last one issued: tokens never go back
	used_at timestamptz NOT NULL  -- the last attempt, extension or new limit
)`,
		`CREATE TABLE IF NOT EXISTS ` + permits + ` (
	key        text NOT NULL,
	owner      text NOT NULL,
	token      bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (key, owner)
)`,
		// The holders are the permits: a release of one not held, or of
		// one whose lease ran out and was taken back, adds none.
		`CREATE OR REPLACE FUNCTION ` + f.acquire + `(p_key text, p_owner text, p_ttl bigint, p_limit integer,
	OUT o_granted boolean, OUT o_token bigint, OUT o_wait bigint)
LANGUAGE plpgsql AS $f$
DECLARE
	s record;
	n integer;
	first timestamptz;
	ends timestamptz;
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'redfence: semaphores and read-write locks need READ COMMITTED, not %',
			current_setting('transaction_isolation') USING ERRCODE = '0A000';
	END IF;
	INSERT INTO ` + sems + ` (key, lim, token, used_at) VALUES (p_key, p_limit, 0, clock_timestamp())
	ON CONFLICT (key) DO NOTHING;
	SELECT * INTO s FROM ` + sems + ` AS x WHERE x.key = p_key FOR UPDATE;
	` + reclaim + `
	ends := clock_timestamp() + p_ttl * interval '1 millisecond';
	o_granted := true;
	o_wait := 0;
	UPDATE ` + permits + ` AS p SET expires_at = ends WHERE p.key = p_key AND p.owner = p_owner
	RETURNING p.token INTO o_token;
	IF FOUND THEN
		UPDATE ` + sems + ` AS x SET used_at = clock_timestamp() WHERE x.key = p_key;
		RETURN;
	END IF;
	SELECT count(*), min(p.expires_at) INTO n, first FROM ` + permits + ` AS p WHERE p.key = p_key;
	IF n = 0 AND s.used_at <= clock_timestamp() - ` + forgetAfter + ` THEN
		s.lim := p_limit;
	END IF;
	IF n >= s.lim THEN
		UPDATE ` + sems + ` AS x SET lim = s.lim, used_at = clock_timestamp() WHERE x.key = p_key;
		o_granted := false;
		o_token := 0;
		o_wait := greatest(1, ceil(extract(epoch FROM (first - clock_timestamp())) * 1000));
		RETURN;
	END IF;
	o_token := greatest(s.token + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
	UPDATE ` + sems + ` AS x SET lim = s.lim, token = o_token, used_at = clock_timestamp() WHERE x.key = p_key;
	INSERT INTO ` + permits + ` (key, owner, token, expires_at) VALUES (p_key, p_owner, o_token, ends);
END
$f$`,
		// p_token 0 is the clean-up of an attempt whose outcome is
		// unknown: whatever permit the owner has.
		`CREATE OR REPLACE FUNCTION ` + f.release + `(p_key text, p_owner text, p_token bigint)
RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE
	gone integer;
	released boolean;
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'redfence: semaphores and read-write locks need READ COMMITTED, not %',
			current_setting('transaction_isolation') USING ERRCODE = '0A000';
	END IF;
	PERFORM 1 FROM ` + sems + ` AS x WHERE x.key = p_key FOR UPDATE;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	` + reclaim + `
	GET DIAGNOSTICS gone = ROW_COUNT;
	DELETE FROM ` + permits + ` AS p WHERE p.key = p_key AND p.owner = p_owner AND (p_token = 0 OR p.token = p_token);
	released := FOUND;
	IF released OR gone > 0 THEN
		` + notify + `
	END IF;
	RETURN released;
END
$f$`,
		`CREATE OR REPLACE FUNCTION ` + f.extend + `(p_key text, p_owner text, p_token bigint, p_ttl bigint)
RETURNS boolean LANGUAGE plpgsql AS $f$
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'redfence: semaphores and read-write locks need READ COMMITTED, not %',
			current_setting('transaction_isolation') USING ERRCODE = '0A000';
	END IF;
	PERFORM 1 FROM ` + sems + ` AS x WHERE x.key = p_key FOR UPDATE;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	` + reclaim + `
	UPDATE ` + permits + ` AS p SET expires_at = clock_timestamp() + p_ttl * interval '1 millisecond'
	WHERE p.key = p_key AND p.owner = p_owner AND p.token = p_token;
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	UPDATE ` + sems + ` AS x SET used_at = clock_timestamp() WHERE x.key = p_key;
	RETURN true;
END
$f$`,
	}
}

// AcquirePermit makes one attempt, in one statement.
func (d *Driver) AcquirePermit(ctx context.Context, a backend.PermitAttempt) (backend.Grant, error) {
	if a.Limit < 1 || a.TTL < time.Millisecond {
		return backend.Grant{}, invalidf("permit attempt with limit %d and lease %v", a.Limit, a.TTL)
	}
	return d.attemptHold(ctx, "acquire permit", 1, d.sem.acquire, a.Key, a.Owner, a.TTL.Milliseconds(), a.Limit)
}

// attemptHold runs an acquire function, a permit's or a read-write hold's,
// once: granted with a token of at least least, or refused with how long
// to wait.
func (d *Driver) attemptHold(ctx context.Context, op string, least int64, stmt string, args ...any) (backend.Grant, error) {
	var granted bool
	var token, wait int64
	err := d.db.QueryRow(ctx, stmt, args...).Scan(&granted, &token, &wait)
	switch {
	case err != nil:
		return backend.Grant{}, holdFailed(op, err)
	case !granted:
		return backend.Grant{Status: backend.Held, Remaining: time.Duration(wait) * time.Millisecond}, nil
	case token < least:
		return backend.Grant{}, fmt.Errorf("pgdriver: %s: granted with token %d", op, token)
	}
	return backend.Grant{Status: backend.Acquired, Token: token}, nil
}

// ReleasePermit gives back p's permit (any of p.Owner's with Token 0): true
// when it was held. A release NOTIFYs the semaphore's waiters.
func (d *Driver) ReleasePermit(ctx context.Context, p backend.Lease) (bool, error) {
	var released bool
	if err := d.db.QueryRow(ctx, d.sem.release, p.Key, p.Owner, p.Token).Scan(&released); err != nil {
		return false, holdFailed("release permit", err)
	}
	return released, nil
}

// ExtendPermits renews every permit in one statement, in the keys' byte
// order as Extend does.
func (d *Driver) ExtendPermits(ctx context.Context, permits []backend.Lease) ([]backend.Renewal, error) {
	return d.renewEach(ctx, "extend permits", d.sem.extend, permits)
}

// SetLimit stores key's limit and wakes its waiters; a limit below 1 is
// bad input.
func (d *Driver) SetLimit(ctx context.Context, key string, limit int) error {
	if limit < 1 {
		return invalidf("semaphore limit %d is below 1", limit)
	}
	rows, err := d.db.Query(ctx, d.sem.limit, key, limit)
	if err != nil {
		return holdFailed("set limit", err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return holdFailed("set limit", err)
	}
	return nil
}

// InspectSemaphore reads the limit and the live holders in one statement,
// one snapshot.
func (d *Driver) InspectSemaphore(ctx context.Context, key string) (backend.SemaphoreState, error) {
	rows, err := d.db.Query(ctx, d.sem.inspect, key)
	if err != nil {
		return backend.SemaphoreState{}, holdFailed("inspect semaphore", err)
	}
	var st backend.SemaphoreState
	var limit int
	var owner *string
	var token, left int64
	_, err = pgx.ForEachRow(rows, []any{&limit, &owner, &token, &left}, func() error {
		st.Limit = limit
		if owner != nil {
			st.Holders = append(st.Holders, backend.PermitHolder{Owner: *owner, Token: token, Left: time.Duration(left) * time.Millisecond})
		}
		return nil
	})
	if err != nil {
		return backend.SemaphoreState{}, holdFailed("inspect semaphore", err)
	}
	return st, nil
}

// WatchPermits wakes wake each time a permit of key may have come back (a
// release, a new limit), from the session WithListener names; without one
// there is nothing to watch and waiters poll.
func (d *Driver) WatchPermits(key string, wake func()) (<-chan struct{}, func()) {
	if d.listen == nil {
		return nil, nil
	}
	return d.listen.watch(semPrefix+key, wake)
}

// renewEach runs an extend function over holds in one statement, in the
// keys' byte order (rows are locked in it, as by Extend and LockTx), and
// returns one Renewal per hold in holds' order.
func (d *Driver) renewEach(ctx context.Context, op, stmt string, holds []backend.Lease) ([]backend.Renewal, error) {
	out := make([]backend.Renewal, len(holds))
	if len(holds) == 0 {
		return out, nil
	}
	order := sortedByKey(holds)
	keys, owners := make([]string, len(holds)), make([]string, len(holds))
	tokens, ttls := make([]int64, len(holds)), make([]int64, len(holds))
	for i, j := range order {
		h := holds[j]
		keys[i], owners[i], tokens[i], ttls[i] = h.Key, h.Owner, h.Token, h.TTL.Milliseconds()
	}
	rows, err := d.db.Query(ctx, stmt, keys, owners, tokens, ttls)
	if err != nil {
		return out, holdFailed(op, err)
	}
	got := make([]backend.Renewal, len(holds))
	var i int64
	var ok bool
	_, err = pgx.ForEachRow(rows, []any{&i, &ok}, func() error {
		if i < 1 || int(i) > len(holds) {
			return fmt.Errorf("row %d of %d", i, len(holds))
		}
		if got[i-1] = backend.Gone; ok {
			got[i-1] = backend.Renewed
		}
		return nil
	})
	if err != nil {
		return out, holdFailed(op, err)
	}
	for i, j := range order {
		out[j] = got[i]
	}
	return out, nil
}

// holdFailed is a semaphore's or read-write lock's failed statement: a
// session not at READ COMMITTED, which their functions refuse (their
// holders are read after the row lock, by a later snapshot), is the
// caller's to fix; anything else an unknown outcome.
func holdFailed(op string, err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "0A000" {
		return fmt.Errorf("pgdriver: %s: %w", op, err)
	}
	return failed(op, err)
}
