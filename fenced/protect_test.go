package fenced_test

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// protected gives a test its own fence table and an accounts table, seeded
// with ids 1 and 2, protected under 'account:' || id.
func protected(t *testing.T, opts ...fenced.ProtectOption) (pool *pgxpool.Pool, g *fenced.Guard, accounts, fences string) {
	t.Helper()
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	accounts = data + "_acct"
	_, err := pool.Exec(ctx, `CREATE TABLE `+accounts+` (id int PRIMARY KEY, balance int NOT NULL);
		INSERT INTO `+accounts+` VALUES (1, 100), (2, 100)`)
	require.NoError(t, err)
	require.NoError(t, g.Protect(ctx, accounts, `'account:' || id`, opts...))
	return pool, g, accounts, fences
}

func code(err error) string {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		return pg.Code
	}
	return ""
}

func balances(t *testing.T, pool *pgxpool.Pool, accounts string) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT id || '=' || balance FROM `+accounts+` ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(out, ",")
}

// A writer that never heard of the lock is refused, whatever the statement,
// and nothing it wrote stays.
func TestProtectRefusesRawWriters(t *testing.T) {
	pool, _, accounts, _ := protected(t)
	ctx := context.Background()
	for name, write := range map[string]func() error{
		"INSERT": func() error { _, err := pool.Exec(ctx, `INSERT INTO `+accounts+` VALUES (3, 1)`); return err },
		"UPDATE": func() error { _, err := pool.Exec(ctx, `UPDATE `+accounts+` SET balance = 0 WHERE id = 1`); return err },
		"DELETE": func() error { _, err := pool.Exec(ctx, `DELETE FROM `+accounts+` WHERE id = 2`); return err },
		"INSERT ON CONFLICT": func() error {
			_, err := pool.Exec(ctx, `INSERT INTO `+accounts+` VALUES (1, 0) ON CONFLICT (id) DO UPDATE SET balance = EXCLUDED.balance`)
			return err
		},
		"COPY": func() error {
			_, err := pool.CopyFrom(ctx, pgx.Identifier{accounts}, []string{"id", "balance"}, pgx.CopyFromRows([][]any{{7, 1}}))
			return err
		},
		"TRUNCATE": func() error { _, err := pool.Exec(ctx, `TRUNCATE `+accounts); return err },
	} {
		t.Run(name, func(t *testing.T) {
			err := write()
			require.Error(t, err)
			assert.Equal(t, fenced.CodeNoToken, code(err), "%v", err)
			assert.ErrorIs(t, fenced.Refusal(err), fenced.ErrNoToken)
			// The refusal names the way around it, on the record.
			var pg *pgconn.PgError
			require.ErrorAs(t, err, &pg)
			if name == "TRUNCATE" { // no row, no resource: the message says it
				assert.Contains(t, pg.Message, "redfence.bypass")
			} else {
				assert.Contains(t, pg.Hint, "redfence.bypass")
			}
			assert.Equal(t, "1=100,2=100", balances(t, pool, accounts))
		})
	}
	t.Run("psql", func(t *testing.T) {
		psql, err := exec.LookPath("psql")
		if err != nil {
			t.Fatalf("psql not found: install PostgreSQL's client (apt-get install postgresql-client)")
		}
		cmd := exec.CommandContext(ctx, psql, testutil.PostgresURL(t), "-v", "ON_ERROR_STOP=1", "-c", `UPDATE `+accounts+` SET balance = 0`)
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "psql wrote: %s", out)
		assert.Contains(t, string(out), "no fencing token for resource account:")
		assert.Equal(t, "1=100,2=100", balances(t, pool, accounts))
	})
}

// The guard's callers write as before; a row outside the resources its
// transaction declared is refused, and a row moving between resources
// needs both.
func TestProtectLetsGuardCallersWrite(t *testing.T) {
	pool, g, accounts, _ := protected(t)
	ctx := context.Background()
	update := func(set, where string) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET `+set+` WHERE `+where)
			return err
		}
	}
	require.NoError(t, g.Do(ctx, "account:1", 5, update("balance = 90", "id = 1")))
	err := g.Do(ctx, "account:1", 5, update("balance = 0", "id = 2"))
	assert.ErrorIs(t, err, fenced.ErrNoToken, "a row of another resource")
	assert.Contains(t, err.Error(), "account:2")
	var pg *pgconn.PgError
	assert.ErrorAs(t, err, &pg, "the database's error is still there")

	err = g.Do(ctx, "account:1", 5, update("id = 3", "id = 1"))
	assert.ErrorIs(t, err, fenced.ErrNoToken, "moving a row to account:3 needs account:3's token")
	err = g.Do(ctx, "account:3", 5, update("id = 3", "id = 1"))
	assert.ErrorIs(t, err, fenced.ErrNoToken, "moving it away needs account:1's token")

	// One transaction, several resources: each declared with its token.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, g.Check(ctx, tx, "account:1", 5))
		require.NoError(t, g.Check(ctx, tx, "account:3", 1))
		_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET id = 3 WHERE id = 1`)
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, "2=100,3=90", balances(t, pool, accounts))

	// A rolled-back savepoint takes its declaration with it.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		sp, err := tx.Begin(ctx)
		require.NoError(t, err)
		require.NoError(t, g.Check(ctx, sp, "account:2", 9))
		require.NoError(t, sp.Rollback(ctx))
		_, err = tx.Exec(ctx, `UPDATE `+accounts+` SET balance = 1 WHERE id = 2`)
		return err
	})
	assert.Equal(t, fenced.CodeNoToken, code(err))
}

// A stale holder is refused by the guard, and by the trigger alone when
// the guard's own check is switched off.
func TestProtectRefusesStaleTokens(t *testing.T) {
	pool, g, accounts, _ := protected(t)
	ctx := context.Background()
	_, err := g.Raise(ctx, "account:1", 10)
	require.NoError(t, err)
	err = g.Do(ctx, "account:1", 5, func(ctx context.Context, tx pgx.Tx) error {
		t.Error("fn ran with a stale token")
		return nil
	})
	assert.ErrorIs(t, err, fenced.ErrStaleToken)

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, fenced.DeclareOnly(ctx, g, tx, "account:1", 5))
		_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = 0 WHERE id = 1`)
		return err
	})
	require.Error(t, err)
	assert.Equal(t, fenced.CodeStaleToken, code(err))
	var stale *fenced.StaleTokenError
	require.ErrorAs(t, fenced.Refusal(err), &stale)
	assert.Equal(t, fenced.StaleTokenError{Resource: "account:1", Token: 5, Highest: 10}, *stale)
	assert.Equal(t, "1=100,2=100", balances(t, pool, accounts))

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, fenced.DeclareOnly(ctx, g, tx, "account:1", 10))
		_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = 0 WHERE id = 1`)
		return err
	})
	assert.NoError(t, err, "an equal token passes")
}

// The bypass is explicit (a setting that names a reason), audited per
// statement with a NOTICE, and WithBypassRole limits it to a role.
func TestProtectBypass(t *testing.T) {
	pool, _, accounts, fences := protected(t)
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(testutil.PostgresURL(t))
	require.NoError(t, err)
	var notices []string
	var mu sync.Mutex
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		mu.Lock()
		notices = append(notices, n.Message)
		mu.Unlock()
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	require.NoError(t, err)
	defer conn.Close(ctx)

	before := time.Now().Add(-time.Minute)
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL redfence.bypass = 'backfill, ticket 42'`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = 0 WHERE id = 1`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `TRUNCATE `+accounts)
		return err
	})
	require.NoError(t, err)
	assert.Empty(t, balances(t, pool, accounts))
	mu.Lock()
	assert.Len(t, notices, 2)
	if len(notices) > 0 {
		assert.Contains(t, notices[0], "UPDATE on public."+accounts+" without a fencing token (bypass: backfill, ticket 42)")
	}
	mu.Unlock()

	rows, err := pool.Query(ctx, `SELECT operation, reason, username, table_name, at FROM `+fences+`_bypass ORDER BY at`)
	require.NoError(t, err)
	type entry struct {
		Op, Reason, User, Table string
		At                      time.Time
	}
	got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[entry])
	require.NoError(t, err)
	require.Len(t, got, 2)
	assert.Equal(t, "UPDATE", got[0].Op)
	assert.Equal(t, "TRUNCATE", got[1].Op)
	assert.Equal(t, "backfill, ticket 42", got[0].Reason)
	assert.Equal(t, "public."+accounts, got[0].Table)
	assert.NotEmpty(t, got[0].User)
	assert.True(t, got[0].At.After(before))

	// Outside the transaction the setting is gone: refused again.
	_, err = conn.Exec(ctx, `INSERT INTO `+accounts+` VALUES (5, 5)`)
	assert.Equal(t, fenced.CodeNoToken, code(err))
}

func TestProtectBypassRole(t *testing.T) {
	ctx := context.Background()
	pool, g, accounts, _ := protected(t)
	ops := role(t, pool, "ops", "")
	writer := role(t, pool, "w", "LOGIN")
	_, err := pool.Exec(ctx, `GRANT ALL ON `+accounts+` TO `+writer)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `REVOKE ALL ON `+accounts+` FROM `+writer)
		assert.NoError(t, err)
	})
	require.NoError(t, g.Protect(ctx, accounts, `'account:' || id`, fenced.WithBypassRole(ops)))
	conn := connectAs(t, writer)
	try := func() error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL redfence.bypass = 'drill'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = 1 WHERE id = 1`)
			return err
		})
	}
	assert.Equal(t, fenced.CodeNoToken, code(try()), "a non-member's bypass is no bypass")
	_, err = pool.Exec(ctx, `GRANT `+ops+` TO `+writer)
	require.NoError(t, err)
	require.NoError(t, try(), "a member's bypass")
	assert.Equal(t, "1=1,2=100", balances(t, pool, accounts))
}

// Protect is idempotent and safe to run at once from several places; a bad
// expression changes nothing; Unprotect lets raw writers back in.
func TestProtectLifecycle(t *testing.T) {
	pool, g, accounts, _ := protected(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { assert.NoError(t, g.Protect(ctx, accounts, `'account:' || id`)) })
	}
	wg.Wait()

	err := g.Protect(ctx, accounts, `'account:' || no_such_column`)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no_such_column")
	_, err = pool.Exec(ctx, `UPDATE `+accounts+` SET balance = 0`)
	assert.Equal(t, fenced.CodeNoToken, code(err), "the old trigger still stands")

	for _, bad := range []struct{ table, expr string }{{accounts, ""}, {accounts, "  "}, {"a.b.c", "id"}, {"", "id"}} {
		assert.ErrorIs(t, g.Protect(ctx, bad.table, bad.expr), fenced.ErrInvalid, "%q %q", bad.table, bad.expr)
	}
	assert.ErrorIs(t, g.Unprotect(ctx, "a.b.c"), fenced.ErrInvalid)
	var nilGuard *fenced.Guard
	assert.ErrorIs(t, nilGuard.Protect(ctx, accounts, "id"), fenced.ErrInvalid)

	require.NoError(t, g.Unprotect(ctx, accounts))
	require.NoError(t, g.Unprotect(ctx, accounts), "idempotent")
	_, err = pool.Exec(ctx, `UPDATE `+accounts+` SET balance = 0`)
	assert.NoError(t, err)
	_, err = pool.Exec(ctx, `TRUNCATE `+accounts)
	assert.NoError(t, err)
}

// The audit cannot be dodged by setting the bypass inside the statement,
// nor hidden behind a temporary table, and its user is the session's; the
// trigger's function runs on a pinned search path.
func TestProtectAuditCannotBeDodged(t *testing.T) {
	pool, _, accounts, fences := protected(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer conn.Release()
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM `+fences+`_bypass`).Scan(&n))
		return n
	}

	_, err = conn.Exec(ctx, `UPDATE `+accounts+` SET balance = 7 WHERE id = 2 AND set_config('redfence.bypass', 'sneaky', true) IS NOT NULL`)
	require.NoError(t, err, "a bypass is a bypass, wherever it is set")
	assert.Equal(t, 1, count(), "but it is on the record")

	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE `+fences+`_bypass (at timestamptz DEFAULT now(), txid bigint, username text, table_name text, operation text, reason text) ON COMMIT DROP`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SET LOCAL redfence.bypass = 'hidden'`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = 55 WHERE id = 2`)
		return err
	})
	require.NoError(t, err)
	assert.Equal(t, 2, count(), "a temporary table of the audit's name hides nothing")

	rows, err := pool.Query(ctx, `SELECT DISTINCT p.prosecdef, p.proconfig FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid
		WHERE t.tgrelid = $1::regclass AND t.tgname LIKE 'redfence%'`, accounts)
	require.NoError(t, err)
	type fn struct {
		Definer bool
		Config  []string
	}
	fns, err := pgx.CollectRows(rows, pgx.RowToStructByPos[fn])
	require.NoError(t, err)
	assert.Equal(t, []fn{{true, []string{"search_path=pg_catalog, pg_temp"}}}, fns, "one function, its owner's rights, a pinned path")
}

// The check sees the row as stored: a generated column can be the
// resource, and another BEFORE trigger cannot move a row past it.
func TestProtectSeesTheStoredRow(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE `+data+`_gen (id int PRIMARY KEY, owner int NOT NULL, res text GENERATED ALWAYS AS ('owner:' || owner) STORED);
		CREATE FUNCTION `+data+`_flip() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF NEW.id < 0 THEN NEW.owner := 99; END IF; RETURN NEW; END $$;
		CREATE TRIGGER zz_flip BEFORE INSERT OR UPDATE ON `+data+`_gen FOR EACH ROW EXECUTE FUNCTION `+data+`_flip()`)
	require.NoError(t, err)
	require.NoError(t, g.Protect(ctx, data+"_gen", "res"))
	insert := func(id int) func(context.Context, pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO `+data+`_gen (id, owner) VALUES ($1, 1)`, id)
			return err
		}
	}
	require.NoError(t, g.Do(ctx, "owner:1", 1, insert(1)), "the generated resource is filled in")
	err = g.Do(ctx, "owner:1", 1, insert(-1))
	assert.ErrorIs(t, err, fenced.ErrNoToken, "the row another trigger moved to owner:99")
}

// Partitions are covered, directly written or truncated; a table with
// inheritance children is refused; so are a role that does not exist and
// names that would break the trigger's quoting.
func TestProtectPartitionsAndRefusals(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `CREATE TABLE `+data+`_p (id int, region text, v int) PARTITION BY LIST (region);
		CREATE TABLE `+data+`_p_eu PARTITION OF `+data+`_p FOR VALUES IN ('eu');
		INSERT INTO `+data+`_p VALUES (1, 'eu', 0);
		CREATE TABLE `+data+`_inh (id int PRIMARY KEY);
		CREATE TABLE `+data+`_inh_child () INHERITS (`+data+`_inh)`)
	require.NoError(t, err)
	require.NoError(t, g.Protect(ctx, data+"_p", `'p:' || id`))
	for _, q := range []string{
		`UPDATE ` + data + `_p_eu SET v = 1`,
		`INSERT INTO ` + data + `_p_eu VALUES (2, 'eu', 0)`,
		`TRUNCATE ` + data + `_p_eu`,
		`TRUNCATE ` + data + `_p`,
	} {
		_, err := pool.Exec(ctx, q)
		assert.Equal(t, fenced.CodeNoToken, code(err), "%s: %v", q, err)
	}
	err = g.Do(ctx, "p:1", 1, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+data+`_p_eu SET v = 2 WHERE id = 1`)
		return err
	})
	assert.NoError(t, err)

	assert.ErrorIs(t, g.Protect(ctx, data+"_inh", "id::text"), fenced.ErrInvalid, "inheritance children")
	assert.ErrorIs(t, g.Protect(ctx, data+"_p", `'p:' || id`, fenced.WithBypassRole("no_such_role_rf")), fenced.ErrInvalid)
	assert.ErrorIs(t, g.Protect(ctx, data+"_p", `'p:' || id`, fenced.WithBypassRole("a$redfence$b")), fenced.ErrInvalid)
	assert.ErrorIs(t, g.Protect(ctx, data+"_p", `'$redfence$' || id`), fenced.ErrInvalid)
	assert.ErrorIs(t, g.Protect(ctx, data+"_nope", "id"), fenced.ErrInvalid, "no such table")
	require.NoError(t, g.Unprotect(ctx, data+"_p"))
	_, err = pool.Exec(ctx, `TRUNCATE `+data+`_p_eu`)
	assert.NoError(t, err, "Unprotect removes the partitions' guards too")
}

// A token recorded in one Guard's fence does not pass another Guard's
// trigger: with two, a writer needs both.
func TestProtectTwoGuards(t *testing.T) {
	pool, g1, accounts, fences := protected(t)
	ctx := context.Background()
	g2 := newGuard(t, pool, fenced.WithTable(fences+"_two"))
	require.NoError(t, g2.Migrate(ctx))
	require.NoError(t, g2.Protect(ctx, accounts, `'account:' || id`))
	update := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = 1 WHERE id = 1`)
		return err
	}
	assert.ErrorIs(t, g1.Do(ctx, "account:1", 5, update), fenced.ErrNoToken, "Guard 2's fence was never met")
	assert.ErrorIs(t, g2.Do(ctx, "account:1", 5, update), fenced.ErrNoToken, "Guard 1's fence was never met")
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		require.NoError(t, g1.Check(ctx, tx, "account:1", 5))
		require.NoError(t, g2.Check(ctx, tx, "account:1", 5))
		return update(ctx, tx)
	})
	assert.NoError(t, err)
}
