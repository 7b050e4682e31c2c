package fenced_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// Issue 34, row 1: two fence tables of one name in two schemas (a tenant
// per schema, each service on its own search path) are two fences: a token
// recorded in one never passes the other's trigger, and each Guard's
// Protect adds its own trigger beside the other's.
func TestProtectSameFenceNameInTwoSchemas(t *testing.T) {
	pool := testutil.Postgres(t)
	ctx := context.Background()
	n := tableSeq.Add(1)
	ta, tb := fmt.Sprintf("rf_ta_%d", n), fmt.Sprintf("rf_tb_%d", n)
	_, err := pool.Exec(ctx, `CREATE SCHEMA `+ta+`; CREATE SCHEMA `+tb+`;
		CREATE TABLE `+tb+`.accounts (id int PRIMARY KEY, written_by bigint NOT NULL);
		INSERT INTO `+tb+`.accounts VALUES (1, 0)`)
	require.NoError(t, err)
	ga, gb := newGuard(t, poolWithPath(t, ta)), newGuard(t, poolWithPath(t, tb)) // both "redfence_fences"
	require.NoError(t, ga.Migrate(ctx))
	require.NoError(t, gb.Migrate(ctx))
	accounts := tb + ".accounts"
	write := func(token int64) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET written_by = $1 WHERE id = 1`, token)
			return err
		}
	}
	writtenBy := func() (by int64) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT written_by FROM `+accounts+` WHERE id = 1`).Scan(&by))
		return by
	}

	require.NoError(t, gb.Protect(ctx, accounts, `'account:' || id`))
	_, err = gb.Raise(ctx, "account:1", 3)
	require.NoError(t, err)
	assert.ErrorIs(t, ga.Do(ctx, "account:1", 5, write(5)), fenced.ErrNoToken, "A's token is no token in B's fence")
	require.NoError(t, gb.Do(ctx, "account:1", 4, write(4)))
	assert.Equal(t, int64(4), writtenBy())

	// A protects the same table: B's trigger stays, and a writer needs both.
	require.NoError(t, ga.Protect(ctx, accounts, `'account:' || id`))
	assert.ErrorIs(t, gb.Do(ctx, "account:1", 4, write(4)), fenced.ErrNoToken, "A's trigger")
	assert.ErrorIs(t, ga.Do(ctx, "account:1", 5, write(5)), fenced.ErrNoToken, "B's trigger")
	// In one transaction each fence is named with its schema: the same
	// fences as the tenants' unqualified names.
	gaq := newGuard(t, pool, fenced.WithTable(ta+".redfence_fences"))
	gbq := newGuard(t, pool, fenced.WithTable(tb+".redfence_fences"))
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, gaq.Check(ctx, tx, "account:1", 5))
		require.NoError(t, gbq.Check(ctx, tx, "account:1", 4))
		return write(5)(ctx, tx)
	})
	require.NoError(t, err, "a token in each fence")
	assert.Equal(t, int64(5), writtenBy())
	var fns int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(DISTINCT tgfoid) FROM pg_trigger WHERE tgrelid = $1::regclass AND tgname LIKE 'redfence%'`, accounts).Scan(&fns))
	assert.Equal(t, 2, fns, "a function per fence")

	// Each fence keeps its own audit.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL redfence.bypass = 'drill'; UPDATE `+accounts+` SET written_by = 0`)
		return err
	})
	require.NoError(t, err)
	for _, s := range []string{ta, tb} {
		var rows int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`.redfence_fences_bypass`).Scan(&rows))
		assert.Equal(t, 1, rows, s)
	}
}

// Issue 34, row 2: an operator an unprivileged user adds to a schema on
// the owner's search path never runs inside the trigger.
func TestProtectIgnoresHostileOperators(t *testing.T) {
	pool, _, fences, _ := setup(t)
	ctx := context.Background()
	open := fmt.Sprintf("rf_open_%d", tableSeq.Add(1))
	_, err := pool.Exec(ctx, `CREATE SCHEMA `+open+`; GRANT USAGE, CREATE ON SCHEMA `+open+` TO PUBLIC;
		CREATE TABLE `+open+`.accounts (id int PRIMARY KEY, balance int NOT NULL);
		INSERT INTO `+open+`.accounts VALUES (1, 100)`)
	require.NoError(t, err)
	// The owner's path holds a schema anyone can create in (public, before
	// PostgreSQL 15).
	owner := poolWithPath(t, open+", public")
	g := newGuard(t, owner, fenced.WithTable("public."+fences))
	accounts := open + ".accounts"
	require.NoError(t, g.Protect(ctx, accounts, `'account:' || id`))

	evil := role(t, pool, "evil", "")
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	_, err = conn.Exec(ctx, `SET ROLE `+evil+`;
		CREATE TABLE `+open+`.evil_log (who text); GRANT INSERT ON `+open+`.evil_log TO PUBLIC;
		CREATE FUNCTION `+open+`.evil_cat(text, integer) RETURNS text LANGUAGE plpgsql AS $$
		BEGIN INSERT INTO `+open+`.evil_log VALUES (current_user); RETURN $1 || $2::text; END $$;
		CREATE OPERATOR `+open+`.|| (LEFTARG = text, RIGHTARG = integer, FUNCTION = `+open+`.evil_cat);
		RESET ROLE`)
	conn.Release()
	require.NoError(t, err)

	err = g.Do(ctx, "account:1", 1, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = 90 WHERE id = 1`)
		return err
	})
	require.NoError(t, err)
	_, err = owner.Exec(ctx, `UPDATE `+accounts+` SET balance = 0`)
	assert.Equal(t, fenced.CodeNoToken, code(err), "%v", err)
	var ran int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+open+`.evil_log`).Scan(&ran))
	assert.Zero(t, ran, "the attacker's operator ran inside the trigger")
}

// Issue 34, row 3: a bypass is on the record once per statement, whatever
// the session sets, and nobody outside the bypass role can add to the
// record or call what writes it.
func TestProtectAuditCannotBeSilenced(t *testing.T) {
	pool, g, accounts, fences := protected(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(testutil.PostgresURL(t))
	require.NoError(t, err)
	var mu sync.Mutex
	notices := 0
	cfg.OnNotice = func(*pgconn.PgConn, *pgconn.Notice) { mu.Lock(); notices++; mu.Unlock() }
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+fences+`_bypass`).Scan(&n))
		return n
	}

	// The marker the old trigger wrote, forged; two statements in one DO.
	_, err = conn.Exec(ctx, `DO $$ BEGIN
		PERFORM set_config('redfence.audited', txid_current()::text || ' ' || statement_timestamp()::text || ' public.`+accounts+` UPDATE', true);
		PERFORM set_config('redfence.bypass', 'forged marker', true);
		UPDATE `+accounts+` SET balance = 1 WHERE id = 1;
		UPDATE `+accounts+` SET balance = 2 WHERE id = 2;
	END $$`)
	require.NoError(t, err)
	assert.Equal(t, 2, count(), "a row per statement")
	// Several statements in one query string.
	_, err = conn.Exec(ctx, `BEGIN; SET LOCAL redfence.bypass = 'multi'; UPDATE `+accounts+` SET balance = 3 WHERE id = 1; UPDATE `+accounts+` SET balance = 4 WHERE id = 2; COMMIT`)
	require.NoError(t, err)
	assert.Equal(t, 4, count())
	mu.Lock()
	assert.Equal(t, 4, notices, "a NOTICE per statement")
	mu.Unlock()

	// Outside the bypass role: no bypass, no row, no way to add one.
	ops := role(t, pool, "ops", "")
	outsider := role(t, pool, "out", "LOGIN")
	_, err = pool.Exec(ctx, `GRANT ALL ON `+accounts+` TO `+outsider)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `REVOKE ALL ON `+accounts+` FROM `+outsider) })
	require.NoError(t, g.Protect(ctx, accounts, `'account:' || id`, fenced.WithBypassRole(ops)))
	out := connectAs(t, outsider)
	err = pgx.BeginFunc(ctx, out, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL redfence.bypass = 'not mine'; UPDATE `+accounts+` SET balance = 0`)
		return err
	})
	assert.Equal(t, fenced.CodeNoToken, code(err), "%v", err)
	_, err = out.Exec(ctx, `INSERT INTO `+fences+`_bypass (txid, username, table_name, operation, reason) VALUES (1, 'x', 'y', 'UPDATE', 'fake')`)
	assert.Error(t, err)
	rows, err := pool.Query(ctx, `SELECT p.oid::regprocedure::text FROM pg_proc p
		WHERE (p.proname LIKE $1 || '%' OR p.oid IN (SELECT tgfoid FROM pg_trigger WHERE tgrelid = $2::regclass))
		AND has_function_privilege($3, p.oid, 'EXECUTE')`, fences, accounts, outsider)
	require.NoError(t, err)
	callable, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Empty(t, callable, "functions of the fence an outsider may call")
	assert.Equal(t, 4, count())
}

// Issue 34, row 4: WithBypassRole judges the session's user; a non-member
// gets nothing by calling a member's SECURITY DEFINER function.
func TestProtectBypassRoleJudgesTheSession(t *testing.T) {
	pool, g, accounts, _ := protected(t)
	ctx := context.Background()
	ops := role(t, pool, "ops", "")
	member := role(t, pool, "member", "LOGIN IN ROLE "+ops)
	outsider := role(t, pool, "out", "LOGIN")
	fn := accounts + "_write"
	_, err := pool.Exec(ctx, `GRANT SELECT, UPDATE ON `+accounts+` TO `+member+`;
		CREATE FUNCTION `+fn+`() RETURNS void LANGUAGE sql SECURITY DEFINER AS $$ UPDATE `+accounts+` SET balance = 0 $$;
		ALTER FUNCTION `+fn+`() OWNER TO `+member+`;
		GRANT EXECUTE ON FUNCTION `+fn+`() TO `+outsider)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `REVOKE ALL ON `+accounts+` FROM `+member) })
	require.NoError(t, g.Protect(ctx, accounts, `'account:' || id`, fenced.WithBypassRole(ops)))
	bypass := func(conn *pgx.Conn, q string) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `SET LOCAL redfence.bypass = 'drill'; `+q)
			return err
		})
	}
	err = bypass(connectAs(t, outsider), `SELECT `+fn+`()`)
	assert.Equal(t, fenced.CodeNoToken, code(err), "a member's function is no bypass for a non-member: %v", err)
	assert.Equal(t, "1=100,2=100", balances(t, pool, accounts))
	require.NoError(t, bypass(connectAs(t, member), `SELECT `+fn+`()`), "the member's own bypass")
	assert.Equal(t, "1=0,2=0", balances(t, pool, accounts))
}

// Issue 34, row 5: the resource expression is read over the table's
// columns only: a column named like a trigger variable is that column, a
// trigger variable that is no column is refused, and so is what cannot be
// evaluated row by row or lives outside pg_catalog unqualified.
func TestProtectExpressionSeesOnlyColumns(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx := context.Background()
	vc := data + "_vc"
	_, err := pool.Exec(ctx, `CREATE TABLE `+vc+` (id int PRIMARY KEY, tg_op text NOT NULL);
		CREATE FUNCTION `+data+`_res(int) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT 'vc:' || $1 $$`)
	require.NoError(t, err)
	require.NoError(t, g.Protect(ctx, vc, `'vc:' || tg_op`))
	err = g.Do(ctx, "vc:a", 1, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+vc+` VALUES (1, 'a')`)
		return err
	})
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE `+vc+` SET tg_op = 'b'`)
	assert.Equal(t, fenced.CodeNoToken, code(err), "%v", err)

	for _, expr := range []string{
		`'vc:' || tg_table_name`,          // a trigger variable, no column
		`'vc:' || count(*)`,               // an aggregate over the statement's rows
		`'vc:' || generate_series(1, id)`, // a set per row
		data + `_res(id)`,                 // a function found only on Protect's search path
	} {
		err := g.Protect(ctx, vc, expr)
		assert.ErrorIs(t, err, fenced.ErrInvalid, "%s", expr)
	}
	require.NoError(t, g.Protect(ctx, vc, `public.`+data+`_res(id)`), "schema-qualified")
	err = g.Do(ctx, "vc:1", 1, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+vc+` SET tg_op = 'c' WHERE id = 1`)
		return err
	})
	assert.NoError(t, err)
}

// An audit table another role created before Protect
// (and whose owner could delete its rows) is refused, before anything
// changes; owned by the role running Protect, it is used.
func TestProtectRefusesAnAuditOwnedByAnother(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	accounts := data + "_acct"
	other := role(t, pool, "audit", "")
	_, err := pool.Exec(ctx, `CREATE TABLE `+accounts+` (id int PRIMARY KEY, balance int NOT NULL);
		CREATE TABLE `+fences+`_bypass (at timestamptz NOT NULL DEFAULT now(), txid bigint NOT NULL, username text NOT NULL,
			table_name text NOT NULL, operation text NOT NULL, reason text NOT NULL);
		ALTER TABLE `+fences+`_bypass OWNER TO `+other)
	require.NoError(t, err)
	triggers := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgrelid = $1::regclass`, accounts).Scan(&n))
		return n
	}

	err = g.Protect(ctx, accounts, `'account:' || id`)
	require.ErrorIs(t, err, fenced.ErrInvalid)
	assert.Contains(t, err.Error(), other)
	assert.Zero(t, triggers(), "nothing changed")

	_, err = pool.Exec(ctx, `ALTER TABLE `+fences+`_bypass OWNER TO current_user`)
	require.NoError(t, err)
	require.NoError(t, g.Protect(ctx, accounts, `'account:' || id`))
	assert.NotZero(t, triggers())
}
