package fenced_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// Every way PostgreSQL has to write rows reaches the check: what held with
// a row trigger holds with the statement triggers.
func TestProtectRefusesEveryWritePath(t *testing.T) {
	pool, g, accounts, _ := protected(t)
	ctx := context.Background()
	owners, fk, src := accounts+"_own", accounts+"_fk", accounts+"_src"
	_, err := pool.Exec(ctx, `CREATE TABLE `+src+` (id int);
		INSERT INTO `+src+` VALUES (1), (2);
		CREATE VIEW `+accounts+`_v AS SELECT * FROM `+accounts+`;
		CREATE RULE ins AS ON INSERT TO `+accounts+`_v DO INSTEAD INSERT INTO `+accounts+` VALUES (NEW.id, NEW.balance);
		CREATE FUNCTION `+src+`_bump() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN UPDATE `+accounts+` SET balance = balance + 1 WHERE id = NEW.id; RETURN NULL; END $$;
		CREATE TRIGGER bump AFTER INSERT ON `+src+` FOR EACH ROW EXECUTE FUNCTION `+src+`_bump();
		CREATE TABLE `+owners+` (id int PRIMARY KEY);
		INSERT INTO `+owners+` VALUES (1), (2);
		CREATE TABLE `+fk+` (id int PRIMARY KEY, owner int REFERENCES `+owners+` ON DELETE CASCADE ON UPDATE CASCADE);
		INSERT INTO `+fk+` VALUES (1, 1), (2, 2)`)
	require.NoError(t, err)
	require.NoError(t, g.Protect(ctx, fk, `'account:' || id`))
	state := func() string {
		var s string
		require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT string_agg(id || '=' || balance, ',' ORDER BY id) FROM `+accounts+`)
			|| ' ' || (SELECT string_agg(id || '>' || owner, ',' ORDER BY id) FROM `+fk+`)
			|| ' ' || (SELECT string_agg(id::text, ',' ORDER BY id) FROM `+owners+`)`).Scan(&s))
		return s
	}
	const before = "1=100,2=100 1>1,2>2 1,2"
	require.Equal(t, before, state())
	for name, q := range map[string]string{
		"writable CTE":       `WITH w AS (UPDATE ` + accounts + ` SET balance = 0 WHERE id = 1 RETURNING id) SELECT count(*) FROM w`,
		"INSERT SELECT":      `INSERT INTO ` + accounts + ` SELECT id + 10, 0 FROM ` + src,
		"MERGE update":       `MERGE INTO ` + accounts + ` a USING ` + src + ` s ON a.id = s.id WHEN MATCHED THEN UPDATE SET balance = 0`,
		"MERGE delete":       `MERGE INTO ` + accounts + ` a USING ` + src + ` s ON a.id = s.id WHEN MATCHED THEN DELETE`,
		"MERGE insert":       `MERGE INTO ` + accounts + ` a USING (SELECT 9 AS id) s ON a.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, 0)`,
		"rule":               `INSERT INTO ` + accounts + `_v VALUES (5, 0)`,
		"a user's trigger":   `INSERT INTO ` + src + ` VALUES (1)`,
		"FK cascade delete":  `DELETE FROM ` + owners + ` WHERE id = 1`,
		"FK cascade update":  `UPDATE ` + owners + ` SET id = 5 WHERE id = 2`,
		"TRUNCATE CASCADE":   `TRUNCATE ` + owners + ` CASCADE`,
		"PREPARE/EXECUTE":    `PREPARE rf_upd AS UPDATE ` + accounts + ` SET balance = 0; EXECUTE rf_upd`,
		"DELETE ... USING":   `DELETE FROM ` + accounts + ` a USING ` + src + ` s WHERE a.id = s.id`,
		"UPDATE ... FROM":    `UPDATE ` + accounts + ` a SET balance = 0 FROM ` + src + ` s WHERE a.id = s.id`,
		"INSERT ON CONFLICT": `INSERT INTO ` + accounts + ` VALUES (2, 0) ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance`,
	} {
		t.Run(name, func(t *testing.T) {
			conn, err := pgx.Connect(ctx, testutil.PostgresURL(t)) // PREPARE outlives a failed statement
			require.NoError(t, err)
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, q)
			assert.Equal(t, fenced.CodeNoToken, code(err), "%v", err)
			assert.Equal(t, before, state())
		})
	}

	// An upsert that lands on another resource's row, through the guard.
	err = g.Do(ctx, "account:9", 1, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+accounts+` VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET balance = 0`)
		return err
	})
	assert.ErrorIs(t, err, fenced.ErrNoToken)

	// With the tokens, the same paths write.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, r := range []string{"account:1", "account:2", "account:5", "account:9"} {
			require.NoError(t, g.Check(ctx, tx, r, 1))
		}
		for _, q := range []string{
			`WITH w AS (UPDATE ` + accounts + ` SET balance = 0 WHERE id = 1 RETURNING id) SELECT count(*) FROM w`,
			`MERGE INTO ` + accounts + ` a USING (SELECT 9 AS id) s ON a.id = s.id WHEN NOT MATCHED THEN INSERT VALUES (s.id, 9)`,
			`INSERT INTO ` + accounts + `_v VALUES (5, 5)`,
			`UPDATE ` + owners + ` SET id = 5 WHERE id = 2`,
			`DELETE FROM ` + owners + ` WHERE id = 1`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("%s: %w", q, err)
			}
		}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, "1=0,2=100,5=5,9=9 2>5 5", state())
}

// A 100,000-row statement is checked as a whole: every resource it
// touches needs its token, and one missing refuses all of it.
func TestProtectBulkStatements(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx := context.Background()
	bulk := data + "_bulk"
	_, err := pool.Exec(ctx, `CREATE TABLE `+bulk+` (id int PRIMARY KEY, tenant int NOT NULL, v int NOT NULL);
		INSERT INTO `+bulk+` SELECT i, i % 100, 0 FROM generate_series(1, 100000) i`)
	require.NoError(t, err)
	require.NoError(t, g.Protect(ctx, bulk, `'t:' || tenant`))
	update := func(declare int) error {
		return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			for i := range declare {
				require.NoError(t, g.Check(ctx, tx, fmt.Sprintf("t:%d", i), 1))
			}
			_, err := tx.Exec(ctx, `UPDATE `+bulk+` SET v = v + 1`)
			return err
		})
	}
	err = update(99)
	assert.Equal(t, fenced.CodeNoToken, code(err))
	assert.Contains(t, err.Error(), "t:99")
	require.NoError(t, update(100))
	var sum int
	require.NoError(t, pool.QueryRow(ctx, `SELECT sum(v) FROM `+bulk).Scan(&sum))
	assert.Equal(t, 100000, sum)
}

// Issue 34, row 8: Protect waits for its lock no longer than its
// lock_timeout, so writers that queue behind it are held that long, not
// until its ctx ends; it changes nothing when it gives up.
func TestProtectGivesUpOnItsLock(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx := context.Background()
	accounts := data + "_acct"
	_, err := pool.Exec(ctx, `CREATE TABLE `+accounts+` (id int PRIMARY KEY, balance int NOT NULL);
		INSERT INTO `+accounts+` VALUES (1, 100), (2, 100)`)
	require.NoError(t, err)
	writer, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = writer.Rollback(ctx) }()
	_, err = writer.Exec(ctx, `UPDATE `+accounts+` SET balance = 1 WHERE id = 1`)
	require.NoError(t, err)

	// The default lock timeout first; when the host is too slow to queue
	// the second writer within it, a longer one.
	var opts []fenced.ProtectOption
	for timeout := fenced.DefaultLockTimeout; ; timeout *= 2 {
		if givesUp(t, pool, g, accounts, opts...) {
			break
		}
		require.Less(t, timeout, 4*fenced.DefaultLockTimeout, "the second writer never queued behind Protect")
		opts = []fenced.ProtectOption{fenced.WithLockTimeout(2 * timeout)}
	}
	require.NoError(t, writer.Commit(ctx))
	_, err = pool.Exec(ctx, `UPDATE `+accounts+` SET balance = 3`)
	assert.NoError(t, err, "nothing was protected")

	assert.ErrorIs(t, g.Protect(ctx, accounts, `'account:' || id`, fenced.WithLockTimeout(0)), fenced.ErrInvalid)
	require.NoError(t, g.Protect(ctx, accounts, `'account:' || id`, fenced.WithLockTimeout(time.Minute)))
}

// givesUp runs Protect of accounts while a writer holds it, queues a
// second writer (of another row) behind Protect, and asserts that Protect
// gives up with 55P03 before its ctx ends and that the second writer
// stays queued while Protect waits and goes on once it gave up. It
// returns false, having asserted nothing, when Protect gave up before the
// second writer was seen queued.
func givesUp(t *testing.T, pool *pgxpool.Pool, g *fenced.Guard, accounts string, opts ...fenced.ProtectOption) bool {
	t.Helper()
	ctx := context.Background()
	pctx, cancel := context.WithTimeout(ctx, time.Minute) // far beyond the lock_timeout
	defer cancel()
	protected := make(chan error, 1)
	go func() { protected <- g.Protect(pctx, accounts, `'account:' || id`, opts...) }()
	// waiting counts the requests of mode not granted on accounts.
	waiting := func(mode string) bool {
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE relation = $1::regclass AND mode = $2 AND NOT granted`,
			accounts, mode).Scan(&n))
		return n > 0
	}
	poll := func(until func() bool) error { // nil once until holds; Protect's result if it came first
		for !until() {
			select {
			case err := <-protected:
				return fmt.Errorf("protect returned: %w", err)
			case <-time.After(time.Millisecond):
			}
		}
		return nil
	}
	require.NoError(t, poll(func() bool { return waiting("ShareRowExclusiveLock") }), "Protect did not wait while a writer held the table")
	second := make(chan error, 1)
	go func() { _, err := pool.Exec(ctx, `UPDATE `+accounts+` SET balance = 2 WHERE id = 2`); second <- err }()
	// Row 2 is not the first writer's: only Protect's request can hold it.
	if err := poll(func() bool { return waiting("RowExclusiveLock") }); err != nil {
		t.Logf("Protect gave up before the second writer queued (%v); again, with a longer lock timeout", err)
		require.NoError(t, <-second)
		return false
	}
	// Seen done, then Protect seen still waiting: it went on while queued.
	for {
		var done bool
		select {
		case err := <-second:
			second <- err
			done = true
		default:
		}
		if !waiting("ShareRowExclusiveLock") {
			break
		}
		require.False(t, done, "the second writer finished while Protect still waited for its lock")
		<-time.After(time.Millisecond) // poll pg_locks
	}
	err := <-protected
	assert.Equal(t, "55P03", code(err), "lock_not_available: %v", err)
	assert.NoError(t, pctx.Err(), "Protect gave up before its ctx ended")
	assert.NoError(t, <-second, "the writer queued behind Protect went on while the first writer's transaction stayed open")
	return true
}

// Issue 34, row 9, what Protect cannot stop, pinned as its doc says: an
// inheritance child added afterwards takes writes without a token (writes
// through the parent that reach its rows are checked), and ALTER COLUMN …
// TYPE … USING rewrites rows without a trigger firing.
func TestProtectCannotStopChildrenOrRewrites(t *testing.T) {
	pool, g, accounts, _ := protected(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE `+accounts+`_child () INHERITS (`+accounts+`)`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO `+accounts+`_child VALUES (3, 100)`)
	assert.NoError(t, err, "documented: a child added after Protect is not protected")
	_, err = pool.Exec(ctx, `UPDATE `+accounts+` SET balance = 0 WHERE id = 3`)
	assert.Equal(t, fenced.CodeNoToken, code(err), "through the parent its rows are checked: %v", err)
	_, err = pool.Exec(ctx, `ALTER TABLE `+accounts+` ALTER COLUMN balance TYPE bigint USING 0`)
	assert.NoError(t, err, "documented: a rewrite fires no trigger")
	assert.Equal(t, "1=0,2=0,3=0", balances(t, pool, accounts))
	assert.ErrorIs(t, g.Protect(ctx, accounts, `'account:' || id`), fenced.ErrInvalid, "a table with children is refused")
}

// A partition added after Protect is checked row by row (its inherited row
// trigger) until Protect runs again and gives it the statement triggers.
func TestProtectPartitionAddedLater(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	p := data + "_p"
	_, err := pool.Exec(ctx, `CREATE TABLE `+p+` (id int, region text, v int) PARTITION BY LIST (region);
		CREATE TABLE `+p+`_eu PARTITION OF `+p+` FOR VALUES IN ('eu');
		INSERT INTO `+p+` VALUES (1, 'eu', 0)`)
	require.NoError(t, err)
	require.NoError(t, g.Protect(ctx, p, `'p:' || id`))
	_, err = pool.Exec(ctx, `CREATE TABLE `+p+`_us PARTITION OF `+p+` FOR VALUES IN ('us')`)
	require.NoError(t, err)
	write := func(q string) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error { _, err := tx.Exec(ctx, q); return err }
	}
	rowsOf := func(table string) (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n))
		return n
	}

	for _, again := range []bool{false, true} {
		if again {
			require.NoError(t, g.Protect(ctx, p, `'p:' || id`))
		}
		_, err = pool.Exec(ctx, `INSERT INTO `+p+`_us VALUES (2, 'us', 0)`)
		assert.Equal(t, fenced.CodeNoToken, code(err), "re-protected %v: %v", again, err)
		_, err = pool.Exec(ctx, `UPDATE `+p+` SET region = 'us' WHERE id = 1`)
		assert.Equal(t, fenced.CodeNoToken, code(err), "a move between partitions, re-protected %v: %v", again, err)
		require.NoError(t, g.Do(ctx, "p:1", 1, write(`UPDATE `+p+` SET region = 'us' WHERE id = 1`)))
		require.NoError(t, g.Do(ctx, "p:1", 1, write(`UPDATE `+p+`_us SET v = v + 1 WHERE id = 1`)))
		require.NoError(t, g.Do(ctx, "p:1", 1, write(`UPDATE `+p+` SET region = 'eu' WHERE id = 1`)))
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			return write(`SET LOCAL redfence.bypass = 'backfill'; INSERT INTO `+p+`_us VALUES (3, 'us', 0), (4, 'us', 0); DELETE FROM `+p+`_us`)(ctx, tx)
		})
		require.NoError(t, err)
	}
	// Row by row, the bypass was recorded per row (2 + 2); after Protect,
	// per statement (1 + 1).
	assert.Equal(t, 6, rowsOf(fences+"_bypass"))
	var enabled []string
	rows, err := pool.Query(ctx, `SELECT tgrelid::regclass::text || ':' || tgenabled::text FROM pg_trigger WHERE tgname LIKE 'redfence%row' ORDER BY 1`)
	require.NoError(t, err)
	enabled, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{p + ":O", p + "_eu:D", p + "_us:D"}, enabled, "the row trigger is the new partitions' only")
}

// Protect replaces what an earlier version created for the same fence
// (triggers and functions named after the configured fence name), and
// leaves another fence's alone.
func TestProtectReplacesLegacyTriggers(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	acc := data + "_acc"
	_, err := pool.Exec(ctx, `CREATE TABLE `+acc+` (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO `+acc+` VALUES (1, 0)`)
	require.NoError(t, err)
	legacy := func(fence, h string) { makeLegacy(t, pool, fence, acc, h) }
	legacy(fences, "0000000a")
	legacy(fences+"_other", "0000000b")
	require.NoError(t, g.Protect(ctx, acc, `'account:' || id`))
	names := func(q string, args ...any) []string {
		rows, err := pool.Query(ctx, q, args...)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		return out
	}
	triggers := names(`SELECT tgname FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname LIKE 'redfence%' ORDER BY 1`, acc)
	assert.NotContains(t, triggers, "redfence_fence_0000000a")
	assert.NotContains(t, triggers, "redfence_truncate_0000000a")
	assert.Contains(t, triggers, "redfence_fence_0000000b", "another fence's")
	assert.Contains(t, triggers, "redfence_truncate_0000000b")
	fns := names(`SELECT proname::text FROM pg_proc WHERE proname LIKE $1 || '%' OR proname LIKE $2 || '%' ORDER BY 1`, fences, acc+"_rf_")
	assert.Equal(t, []string{acc + "_rf_row_0000000b", acc + "_rf_truncate_0000000b", fences + "_other_bypass_record", fences + "_other_check"},
		slices.DeleteFunc(fns, regexp.MustCompile(`^`+acc+`_rf_[0-9a-f]{8}$`).MatchString), "this fence's are gone, but for the new one")
}

// makeLegacy makes on table what an earlier version of Protect made for
// fence: a row and a TRUNCATE trigger named with h, calling the fence's
// shared functions.
func makeLegacy(t *testing.T, pool *pgxpool.Pool, fence, table, h string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), fmt.Sprintf(`
	CREATE OR REPLACE FUNCTION public.%[1]s_check(_res text, _table text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN END $$;
	CREATE OR REPLACE FUNCTION public.%[1]s_bypass_record(_table text, _op text) RETURNS void LANGUAGE plpgsql SECURITY DEFINER AS $$ BEGIN END $$;
	CREATE FUNCTION public.%[2]s_rf_row_%[3]s() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN PERFORM "public"."%[1]s_bypass_record"('t', TG_OP); PERFORM "public"."%[1]s_check"('r', 't'); RETURN NULL; END $$;
	CREATE FUNCTION public.%[2]s_rf_truncate_%[3]s() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN PERFORM "public"."%[1]s_bypass_record"('t', TG_OP); RETURN NULL; END $$;
	CREATE TRIGGER redfence_fence_%[3]s AFTER INSERT OR UPDATE OR DELETE ON %[2]s FOR EACH ROW EXECUTE FUNCTION public.%[2]s_rf_row_%[3]s();
	CREATE TRIGGER redfence_truncate_%[3]s BEFORE TRUNCATE ON %[2]s FOR EACH STATEMENT EXECUTE FUNCTION public.%[2]s_rf_truncate_%[3]s()`, fence, table, h))
	require.NoError(t, err)
}

// Protect and Unprotect take the one lock they need
// before anything else, and wait for it once: SHARE ROW EXCLUSIVE, which
// an open reader does not hold up, or ACCESS EXCLUSIVE when they drop
// triggers (Unprotect, and Protect removing an earlier version's), which
// it does; never the one and then, holding it, a wait for the other.
func TestProtectTakesOneLockUpFront(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	acc := data + "_acc"
	_, err := pool.Exec(ctx, `CREATE TABLE `+acc+` (id int PRIMARY KEY, balance int NOT NULL); INSERT INTO `+acc+` VALUES (1, 0)`)
	require.NoError(t, err)
	reader := func() pgx.Tx {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `SELECT * FROM `+acc)
		require.NoError(t, err)
		return tx
	}

	r := reader()
	require.NoError(t, g.Protect(ctx, acc, `'account:' || id`, fenced.WithLockTimeout(time.Minute)), "a reader does not hold Protect up")
	require.NoError(t, r.Rollback(ctx))

	makeLegacy(t, pool, fences, acc, "0000000a")
	for _, tc := range []struct { // in order: Protect removes the earlier version's triggers
		name string
		run  func(context.Context) error
	}{
		{"Protect after an upgrade", func(ctx context.Context) error {
			return g.Protect(ctx, acc, `'account:' || id`, fenced.WithLockTimeout(time.Minute))
		}},
		{"Unprotect", func(ctx context.Context) error { return g.Unprotect(ctx, acc, fenced.WithLockTimeout(time.Minute)) }},
	} {
		run := tc.run
		t.Run(tc.name, func(t *testing.T) {
			r := reader()
			defer func() { _ = r.Rollback(ctx) }()
			done := make(chan error, 1)
			go func() { done <- run(ctx) }()
			var pid int
			var mode string
			for {
				err := pool.QueryRow(ctx, `SELECT pid, mode FROM pg_locks WHERE relation = $1::regclass AND NOT granted`, acc).Scan(&pid, &mode)
				if err == nil {
					break
				}
				require.ErrorIs(t, err, pgx.ErrNoRows)
				select {
				case err := <-done:
					t.Fatalf("returned (%v) while a reader held the table", err)
				case <-time.After(time.Millisecond): // poll pg_locks
				}
			}
			assert.Equal(t, "AccessExclusiveLock", mode)
			var held []string
			rows, err := pool.Query(ctx, `SELECT mode FROM pg_locks WHERE pid = $1 AND relation = $2::regclass AND granted`, pid, acc)
			require.NoError(t, err)
			held, err = pgx.CollectRows(rows, pgx.RowTo[string])
			require.NoError(t, err)
			assert.Empty(t, held, "it waits holding no lock on the table")
			require.NoError(t, r.Rollback(ctx))
			require.NoError(t, <-done)
		})
	}
}
