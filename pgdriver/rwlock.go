package pgdriver

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/mutex/backend"
)

// RWLocksTable keeps each read-write lock's writer and last write token,
// and RWHoldsTable its readers and waiting writers' marks, one row each,
// beside the lease table in its schema.
const (
	RWLocksTable = "redfence_rwlocks"
	RWHoldsTable = "redfence_rwholds"
)

var _ backend.RWLocker = (*Driver)(nil)

// rwStatements are the Driver's SQL for read-write locks: PL/pgSQL
// functions, as the semaphore's are and for the same reason, each locking
// the lock's row first.
type rwStatements struct {
	acquire, release, extend, downgrade, inspect string
}

// rwFuncs are the functions' quoted, schema-qualified names.
type rwFuncs struct{ reclaim, acquire, release, extend, downgrade string }

// rwPrefix starts a read-write lock's NOTIFY payload (see semPrefix).
const rwPrefix = "\x1fr"

func prepareRW(locks, holds string, f rwFuncs) rwStatements {
	return rwStatements{
		acquire:   `SELECT * FROM ` + f.acquire + `($1, $2, $3, $4, $5)`,
		release:   `SELECT ` + f.release + `($1, $2, $3)`,
		extend:    `SELECT v.i, ` + f.extend + `(v.k, v.o, v.t, v.ttl) FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) WITH ORDINALITY AS v(k, o, t, ttl, i)`,
		downgrade: `SELECT ` + f.downgrade + `($1, $2, $3, $4)`,
		// One statement, one snapshot: a row for the last write's token
		// and the live marks' count ('l'), the live writer's ('w'), and
		// each live reader's ('r'), by the end of its lease.
		inspect: `SELECT 'l', NULL, r.token, (SELECT count(*) FROM ` + holds + ` AS h
		WHERE h.key = r.key AND h.waiting AND h.expires_at > clock_timestamp()), NULL::timestamptz
FROM ` + locks + ` AS r WHERE r.key = $1
UNION ALL
SELECT 'w', r.writer, r.token, ceil(extract(epoch FROM (r.expires_at - clock_timestamp())) * 1000)::bigint, r.expires_at
FROM ` + locks + ` AS r WHERE r.key = $1 AND r.writer IS NOT NULL AND r.expires_at > clock_timestamp()
UNION ALL
SELECT 'r', h.owner, h.token, ceil(extract(epoch FROM (h.expires_at - clock_timestamp())) * 1000)::bigint, h.expires_at
FROM ` + holds + ` AS h WHERE h.key = $1 AND NOT h.waiting AND h.expires_at > clock_timestamp()
ORDER BY 1, 5`,
	}
}

// rwTables is what Migrate creates for read-write locks; the functions
// follow redisdriver's scripts, rule for rule (backend.RWLocker).
func rwTables(locks, holds string, f rwFuncs, channel string) []string {
	notify := `PERFORM ` + notifyKey(channel, `'`+rwPrefix+`' || p_key`) + `;`
	lock := `SELECT * INTO r FROM ` + locks + ` AS x WHERE x.key = p_key FOR UPDATE;`
	reclaim := `freed := ` + f.reclaim + `(p_key);
	SELECT * INTO r FROM ` + locks + ` AS x WHERE x.key = p_key;`
	ends := `clock_timestamp() + p_ttl * interval '1 millisecond'`
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + locks + ` (
	key        text PRIMARY KEY,
	token      bigint NOT NULL, -- the last write's: tokens never go back
	writer     text,
	expires_at timestamptz      -- the writer's lease
)`,
		`CREATE TABLE IF NOT EXISTS ` + holds + ` (
	key        text NOT NULL,
	owner      text NOT NULL,
	waiting    boolean NOT NULL, -- a waiting writer's mark, else a reader
	token      bigint NOT NULL,
	expires_at timestamptz NOT NULL,
	PRIMARY KEY (key, owner)
)`,
		// reclaim takes out the holds and marks whose lease ran out, and
		// an expired writer; true when a hold was (not a mark). Its caller
		// has locked the key's row.
		`CREATE OR REPLACE FUNCTION ` + f.reclaim + `(p_key text) RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE
	readers integer;
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'redfence: semaphores and read-write locks need READ COMMITTED, not %',
			current_setting('transaction_isolation') USING ERRCODE = '0A000';
	END IF;
	WITH gone AS (
		DELETE FROM ` + holds + ` AS h WHERE h.key = p_key AND h.expires_at <= clock_timestamp() RETURNING h.waiting
	)
	SELECT count(*) FILTER (WHERE NOT waiting) INTO readers FROM gone;
	UPDATE ` + locks + ` AS x SET writer = NULL, expires_at = NULL
	WHERE x.key = p_key AND x.writer IS NOT NULL AND x.expires_at <= clock_timestamp();
	RETURN FOUND OR readers > 0;
END
$f$`,
		// A read is refused while a writer holds or a waiting writer's mark
		// is live (writers go first); a write while anyone holds, and then,
		// queued, the attempt marks its owner as waiting for its lease.
		// Only writes issue tokens; a read gets the last write's.
		`CREATE OR REPLACE FUNCTION ` + f.acquire + `(p_key text, p_owner text, p_ttl bigint, p_write boolean, p_queue boolean,
	OUT o_granted boolean, OUT o_token bigint, OUT o_wait bigint)
LANGUAGE plpgsql AS $f$
DECLARE
	r record;
	freed boolean;
	first timestamptz;
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'redfence: semaphores and read-write locks need READ COMMITTED, not %',
			current_setting('transaction_isolation') USING ERRCODE = '0A000';
	END IF;
	INSERT INTO ` + locks + ` (key, token) VALUES (p_key, 0) ON CONFLICT (key) DO NOTHING;
	` + lock + `
	` + reclaim + `
	o_granted := true;
	o_wait := 0;
	IF NOT p_write THEN
		UPDATE ` + holds + ` AS h SET expires_at = ` + ends + `
		WHERE h.key = p_key AND h.owner = p_owner AND NOT h.waiting RETURNING h.token INTO o_token;
		IF FOUND THEN
			RETURN;
		END IF;
		first := r.expires_at;
		IF r.writer IS NULL THEN
			SELECT min(h.expires_at) INTO first FROM ` + holds + ` AS h WHERE h.key = p_key AND h.waiting;
		END IF;
		IF first IS NULL THEN
			INSERT INTO ` + holds + ` (key, owner, waiting, token, expires_at) VALUES (p_key, p_owner, false, r.token, ` + ends + `);
			o_token := r.token;
			RETURN;
		END IF;
	ELSIF r.writer = p_owner THEN
		UPDATE ` + locks + ` AS x SET expires_at = ` + ends + ` WHERE x.key = p_key;
		o_token := r.token;
		RETURN;
	ELSE
		first := r.expires_at;
		IF r.writer IS NULL THEN
			SELECT min(h.expires_at) INTO first FROM ` + holds + ` AS h WHERE h.key = p_key AND NOT h.waiting;
		END IF;
		IF first IS NULL THEN
			o_token := greatest(r.token + 1, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
			DELETE FROM ` + holds + ` AS h WHERE h.key = p_key AND h.owner = p_owner AND h.waiting;
			UPDATE ` + locks + ` AS x SET writer = p_owner, expires_at = ` + ends + `, token = o_token WHERE x.key = p_key;
			RETURN;
		END IF;
		IF p_queue THEN
			INSERT INTO ` + holds + ` AS h (key, owner, waiting, token, expires_at) VALUES (p_key, p_owner, true, 0, ` + ends + `)
			ON CONFLICT (key, owner) DO UPDATE SET expires_at = excluded.expires_at WHERE h.waiting;
			-- a third of its own lease at most, so that the mark is renewed in time
			first := least(first, clock_timestamp() + p_ttl * interval '1 millisecond' / 3);
		END IF;
	END IF;
	o_granted := false;
	o_token := 0;
	o_wait := greatest(1, ceil(extract(epoch FROM (first - clock_timestamp())) * 1000));
END
$f$`,
		// p_token 0 (the clean-up of an attempt, or of a waiting writer
		// that gave up) takes out any hold of the owner and its mark.
		`CREATE OR REPLACE FUNCTION ` + f.release + `(p_key text, p_owner text, p_token bigint)
RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE
	r record;
	freed boolean;
	released boolean := false;
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'redfence: semaphores and read-write locks need READ COMMITTED, not %',
			current_setting('transaction_isolation') USING ERRCODE = '0A000';
	END IF;
	` + lock + `
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	` + reclaim + `
	IF r.writer = p_owner AND (p_token = 0 OR r.token = p_token) THEN
		UPDATE ` + locks + ` AS x SET writer = NULL, expires_at = NULL WHERE x.key = p_key;
		released := true;
		freed := true;
	ELSE
		DELETE FROM ` + holds + ` AS h WHERE h.key = p_key AND h.owner = p_owner AND NOT h.waiting;
		IF FOUND THEN
			released := true;
			freed := freed OR NOT EXISTS (SELECT 1 FROM ` + holds + ` AS h WHERE h.key = p_key AND NOT h.waiting);
		END IF;
	END IF;
	IF p_token = 0 THEN
		DELETE FROM ` + holds + ` AS h WHERE h.key = p_key AND h.owner = p_owner AND h.waiting;
		freed := freed OR FOUND;
	END IF;
	IF freed THEN
		` + notify + `
	END IF;
	RETURN released;
END
$f$`,
		`CREATE OR REPLACE FUNCTION ` + f.extend + `(p_key text, p_owner text, p_token bigint, p_ttl bigint)
RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE
	r record;
	freed boolean;
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'redfence: semaphores and read-write locks need READ COMMITTED, not %',
			current_setting('transaction_isolation') USING ERRCODE = '0A000';
	END IF;
	` + lock + `
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	` + reclaim + `
	IF r.writer = p_owner THEN
		IF r.token <> p_token THEN
			RETURN false;
		END IF;
		UPDATE ` + locks + ` AS x SET expires_at = ` + ends + ` WHERE x.key = p_key;
		RETURN true;
	END IF;
	UPDATE ` + holds + ` AS h SET expires_at = ` + ends + `
	WHERE h.key = p_key AND h.owner = p_owner AND NOT h.waiting AND h.token = p_token;
	RETURN FOUND;
END
$f$`,
		// The write becomes a read with its token in one step: no other
		// writer comes between. True too when the owner reads with the
		// token already (a retry after an unknown outcome).
		`CREATE OR REPLACE FUNCTION ` + f.downgrade + `(p_key text, p_owner text, p_token bigint, p_ttl bigint)
RETURNS boolean LANGUAGE plpgsql AS $f$
DECLARE
	r record;
	freed boolean;
BEGIN
	IF current_setting('transaction_isolation') <> 'read committed' THEN
		RAISE EXCEPTION 'redfence: semaphores and read-write locks need READ COMMITTED, not %',
			current_setting('transaction_isolation') USING ERRCODE = '0A000';
	END IF;
	` + lock + `
	IF NOT FOUND THEN
		RETURN false;
	END IF;
	` + reclaim + `
	IF EXISTS (SELECT 1 FROM ` + holds + ` AS h WHERE h.key = p_key AND h.owner = p_owner AND NOT h.waiting AND h.token = p_token) THEN
		RETURN true;
	END IF;
	IF r.writer IS DISTINCT FROM p_owner OR r.token <> p_token THEN
		RETURN false;
	END IF;
	UPDATE ` + locks + ` AS x SET writer = NULL, expires_at = NULL WHERE x.key = p_key;
	INSERT INTO ` + holds + ` (key, owner, waiting, token, expires_at) VALUES (p_key, p_owner, false, p_token, ` + ends + `);
	` + notify + `
	RETURN true;
END
$f$`,
	}
}

// AcquireRW makes one attempt, in one statement.
func (d *Driver) AcquireRW(ctx context.Context, a backend.RWAttempt) (backend.Grant, error) {
	if a.TTL < time.Millisecond {
		return backend.Grant{}, invalidf("read-write lock attempt with lease %v", a.TTL)
	}
	least := int64(0) // a read before any write gets token 0
	if a.Write {
		least = 1
	}
	return d.attemptHold(ctx, "acquire read-write lock", least, d.rw.acquire, a.Key, a.Owner, a.TTL.Milliseconds(), a.Write, a.Queue)
}

// ReleaseRW gives back h's hold (with Token 0, any hold of h.Owner and its
// waiting mark): true when a hold was given back. It NOTIFYs the lock's
// waiters when that may let one in.
func (d *Driver) ReleaseRW(ctx context.Context, h backend.Lease) (bool, error) {
	var released bool
	if err := d.db.QueryRow(ctx, d.rw.release, h.Key, h.Owner, h.Token).Scan(&released); err != nil {
		return false, holdFailed("release read-write lock", err)
	}
	return released, nil
}

// ExtendRW renews every hold in one statement, in the keys' byte order.
func (d *Driver) ExtendRW(ctx context.Context, holds []backend.Lease) ([]backend.Renewal, error) {
	return d.renewEach(ctx, "extend read-write locks", d.rw.extend, holds)
}

// DowngradeRW makes h's write a read with its token, in one statement.
func (d *Driver) DowngradeRW(ctx context.Context, h backend.Lease) (bool, error) {
	if h.TTL < time.Millisecond {
		return false, invalidf("read-write lock downgrade with lease %v", h.TTL)
	}
	var ok bool
	if err := d.db.QueryRow(ctx, d.rw.downgrade, h.Key, h.Owner, h.Token, h.TTL.Milliseconds()).Scan(&ok); err != nil {
		return false, holdFailed("downgrade read-write lock", err)
	}
	return ok, nil
}

// InspectRW reads the key's live holds in one statement, one snapshot.
func (d *Driver) InspectRW(ctx context.Context, key string) (backend.RWState, error) {
	rows, err := d.db.Query(ctx, d.rw.inspect, key)
	if err != nil {
		return backend.RWState{}, holdFailed("inspect read-write lock", err)
	}
	var st backend.RWState
	var kind string
	var owner *string
	var token, n int64
	var ends *time.Time
	_, err = pgx.ForEachRow(rows, []any{&kind, &owner, &token, &n, &ends}, func() error {
		switch {
		case kind == "l":
			st.LastWrite, st.Waiting = token, int(n)
		case owner == nil:
		case kind == "w":
			st.Writer = &backend.RWHolder{Owner: *owner, Token: token, Left: time.Duration(n) * time.Millisecond}
		default:
			st.Readers = append(st.Readers, backend.RWHolder{Owner: *owner, Token: token, Left: time.Duration(n) * time.Millisecond})
		}
		return nil
	})
	if err != nil {
		return backend.RWState{}, holdFailed("inspect read-write lock", err)
	}
	return st, nil
}

// WatchRW wakes wake each time an attempt on key may succeed (a release, a
// downgrade, a mark taken out), from the session WithListener names;
// without one waiters poll.
func (d *Driver) WatchRW(key string, wake func()) (<-chan struct{}, func()) {
	if d.listen == nil {
		return nil, nil
	}
	return d.listen.watch(rwPrefix+key, wake)
}
