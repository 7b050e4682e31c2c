package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/testutil"
)

// accounts makes e's accounts table: ids "0" to "3", 100 each.
func (e *env) accounts(t *testing.T) string {
	t.Helper()
	table := e.data + "_acct"
	e.exec(t, `CREATE TABLE `+table+` (id `+e.s.text+` PRIMARY KEY, balance BIGINT NOT NULL)`+e.s.engine)
	e.exec(t, `INSERT INTO `+table+` (id, balance) VALUES ('0', 100), ('1', 100), ('2', 100), ('3', 100)`)
	return table
}

// transfer moves amount between two account rows, in the caller's order.
func (e *env) transfer(table, from, to string, amount int) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		for _, step := range []struct {
			id    string
			delta int
		}{{from, -amount}, {to, amount}} {
			if _, err := tx.ExecContext(ctx, e.s.q(`UPDATE `+table+` SET balance = balance + ? WHERE id = ?`), step.delta, step.id); err != nil {
				return err
			}
		}
		return nil
	}
}

// pairs runs rounds of two DoAll calls at once, one claiming a and b, the
// other b and a, released together; a and b are fresh resources each round
// (fresh) or two of the four accounts. It returns every error seen.
func pairs(e *env, accounts string, fresh bool) []error {
	const pairsAtOnce, rounds = 4, 30
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	for p := range pairsAtOnce {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(p), 37))
			for r := range rounds {
				i := rng.IntN(4)
				a, b := fmt.Sprint(i), fmt.Sprint((i+1+rng.IntN(3))%4)
				if fresh {
					a, b = fmt.Sprintf("fresh-%d-%d-a", p, r), fmt.Sprintf("fresh-%d-%d-b", p, r)
				}
				start := make(chan struct{})
				var round sync.WaitGroup
				for _, c := range [][2]string{{a, b}, {b, a}} {
					round.Go(func() {
						<-start
						claims := []sqlfence.Claim{{Resource: c[0], Token: 1}, {Resource: c[1], Token: 1}}
						if err := e.g.DoAll(context.Background(), claims, e.transfer(accounts, c[0], c[1], 1)); err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
						}
					})
				}
				close(start)
				round.Wait()
			}
		})
	}
	wg.Wait()
	return errs
}

// TestDoAllOppositeOrdersDoNotDeadlock: DoAll calls naming the same
// resources in opposite orders, many at once, all commit, at every MySQL
// isolation level too, on fence rows that exist and on rows they create.
// Mutation: record the claims in the caller's order (fence.Canonical
// without its sort): PostgreSQL reports deadlocks (40P01), MySQL too
// (1213); SQLite cannot tell, its one write lock serialises the writers.
func TestDoAllOppositeOrdersDoNotDeadlock(t *testing.T) {
	eachVariant(t, func(t *testing.T, s store) {
		for _, fresh := range []bool{false, true} {
			t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
				e := setup(t, s)
				accounts := e.accounts(t)
				errs := pairs(e, accounts, fresh)
				assert.Zero(t, len(errs), "errors, such as: %v", errors.Join(errs[:min(3, len(errs))]...))
				assert.Equal(t, []int64{400}, column[int64](t, e.db, `SELECT sum(balance) FROM `+accounts), "money appeared or vanished")
			})
		}
	})
}

// TestDoAllOneStaleClaimRefusesAll: whichever claim is stale, first, in the
// middle or last in the fence's order, DoAll returns the error Do would for
// that claim alone, fn never runs, and nothing is written: no row, and no
// token of the other claims, though they were higher. Mutation: check only
// the first claim, and the middle and last cases commit.
func TestDoAllOneStaleClaimRefusesAll(t *testing.T) {
	eachVariant(t, func(t *testing.T, s store) {
		e := setup(t, s)
		ctx := context.Background()
		resources := []string{"a", "b", "c"}
		for _, r := range resources {
			require.NoError(t, e.g.Do(ctx, r, 5, nop))
		}
		for _, stale := range resources {
			var claims []sqlfence.Claim
			for _, r := range []string{"c", "b", "a"} { // the caller's order, not the fence's
				tok := int64(6)
				if r == stale {
					tok = 4
				}
				claims = append(claims, sqlfence.Claim{Resource: r, Token: tok})
			}
			called := false
			err := e.g.DoAll(ctx, claims, func(ctx context.Context, tx *sql.Tx) error {
				called = true
				for _, c := range claims {
					if err := e.insert(c.Resource, c.Token, "all")(ctx, tx); err != nil {
						return err
					}
				}
				return nil
			})
			var se *sqlfence.StaleTokenError
			require.ErrorAs(t, err, &se, "stale %s", stale)
			assert.Equal(t, sqlfence.StaleTokenError{Resource: stale, Token: 4, Highest: 5}, *se)
			assert.Equal(t, e.g.Do(ctx, stale, 4, nop).Error(), err.Error(), "the error a single stale claim gives")
			assert.False(t, called, "fn ran (stale %s)", stale)
			assert.Empty(t, e.tags(t), "a row was written (stale %s)", stale)
			for _, r := range resources {
				assert.Equal(t, int64(5), e.fence(t, r), "%s's token was recorded (stale %s)", r, stale)
			}
		}
		require.NoError(t, e.g.DoAll(ctx, []sqlfence.Claim{{Resource: "c", Token: 7}, {Resource: "a", Token: 5}, {Resource: "c", Token: 7}},
			e.insert("a", 5, "ok")))
		assert.Equal(t, []string{"ok"}, e.tags(t))
		assert.Equal(t, []int64{5, 5, 7}, []int64{e.fence(t, "a"), e.fence(t, "b"), e.fence(t, "c")})
	})
}

// TestDoAllProtectedTable: a table fenced.Guard.Protect guards accepts the
// rows a Postgres DoAll writes for every claimed resource, one statement
// over several of them included, and refuses a row of a resource not
// claimed, leaving nothing of that transaction.
func TestDoAllProtectedTable(t *testing.T) {
	e := setup(t, stores[0])
	ctx := context.Background()
	fg, err := fenced.New(testutil.Postgres(t), fenced.WithTable(e.fences))
	require.NoError(t, err)
	require.NoError(t, fg.Protect(ctx, e.data, "resource"))
	both := []sqlfence.Claim{{Resource: "y", Token: 1}, {Resource: "x", Token: 1}}

	require.NoError(t, e.g.DoAll(ctx, both, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO `+e.data+` (resource, token, tag) VALUES ('x', 1, 'x'), ('y', 1, 'y')`)
		return err
	}))
	err = e.g.DoAll(ctx, both, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO `+e.data+` (resource, token, tag) VALUES ('x', 1, 'x2'), ('z', 1, 'z')`)
		return err
	})
	var pgErr *pgconn.PgError
	require.True(t, errors.As(err, &pgErr), "got %v", err)
	assert.Equal(t, fenced.CodeNoToken, pgErr.Code)
	assert.ErrorIs(t, fenced.Refusal(err), fenced.ErrNoToken)
	assert.Contains(t, pgErr.Message, "resource z")
	assert.Equal(t, []string{"x", "y"}, e.tags(t))
}

// TestCheckAll: in a transaction of the caller's, CheckAll records every
// claim, refuses a stale one naming it, and refuses to follow a read where
// Check does.
func TestCheckAll(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		e := setup(t, s)
		ctx := context.Background()
		inTx := func(fn func(tx *sql.Tx) error) error {
			tx, err := e.db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			if err := fn(tx); err != nil {
				return err
			}
			return tx.Commit()
		}
		claims := []sqlfence.Claim{{Resource: "y", Token: 3}, {Resource: "x", Token: 2}}
		require.NoError(t, inTx(func(tx *sql.Tx) error {
			if err := e.g.CheckAll(ctx, tx, claims); err != nil {
				return err
			}
			return e.insert("x", 2, "checked")(ctx, tx)
		}))
		assert.Equal(t, []int64{2, 3}, []int64{e.fence(t, "x"), e.fence(t, "y")})

		err := inTx(func(tx *sql.Tx) error {
			return e.g.CheckAll(ctx, tx, []sqlfence.Claim{{Resource: "x", Token: 2}, {Resource: "y", Token: 1}})
		})
		var se *sqlfence.StaleTokenError
		require.ErrorAs(t, err, &se)
		assert.Equal(t, sqlfence.StaleTokenError{Resource: "y", Token: 1, Highest: 3}, *se)

		if s.dialect == sqlfence.Postgres {
			err = inTx(func(tx *sql.Tx) error {
				if _, err := tx.ExecContext(ctx, `SELECT count(*) FROM `+e.data); err != nil {
					return err
				}
				return e.g.CheckAll(ctx, tx, claims)
			})
			require.ErrorIs(t, err, sqlfence.ErrCheckNotFirst)
			assert.Contains(t, err.Error(), `"x" and 1 more`)
		}
		assert.Equal(t, []string{"checked"}, e.tags(t))
	})
}

// TestCheckAllWaitsThenCompares: on MySQL, a CheckAll that waits for a
// resource's previous holder to commit is not refused for it: it locks
// every fence row before its first comparison takes the snapshot. Two
// Check calls in a row are (the first's comparison took the snapshot
// before the holder committed), which is what CheckAll's doc says.
// Mutation: lock and compare claim by claim, and CheckAll is refused too.
func TestCheckAllWaitsThenCompares(t *testing.T) {
	for _, s := range []store{stores[1], variants[2]} {
		t.Run(s.name, func(t *testing.T) {
			e := setup(t, s)
			ctx := context.Background()
			for _, r := range []string{"a", "b"} {
				require.NoError(t, e.g.Do(ctx, r, 1, nop))
			}
			claims := []sqlfence.Claim{{Resource: "a", Token: 2}, {Resource: "b", Token: 2}}

			// holdB holds b's fence row until the returned func commits.
			holdB := func() func() {
				held, commit, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
				go func() {
					done <- e.g.Do(ctx, "b", 2, func(ctx context.Context, tx *sql.Tx) error {
						close(held)
						<-commit
						return e.insert("b", 2, "holder")(ctx, tx)
					})
				}()
				<-held
				return func() {
					close(commit)
					require.NoError(t, <-done)
				}
			}

			release := holdB()
			result := make(chan error, 1)
			go func() {
				tx, err := e.db.BeginTx(ctx, nil)
				if err != nil {
					result <- err
					return
				}
				defer func() { _ = tx.Rollback() }()
				if err := e.g.CheckAll(ctx, tx, claims); err != nil {
					result <- err
					return
				}
				result <- tx.Commit()
			}()
			waitForLockWait(t, e.db)
			release()
			require.NoError(t, <-result, "CheckAll refused after waiting for b's holder")

			// Two Checks: the first takes the snapshot while b is held.
			release = holdB() // equal tokens are accepted
			tx, err := e.db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			require.NoError(t, e.g.Check(ctx, tx, "a", 3))
			release()
			assert.ErrorIs(t, e.g.Check(ctx, tx, "b", 3), sqlfence.ErrCheckNotFirst)
		})
	}
}

// waitForLockWait returns once a transaction on db's server waits for a
// row lock. InnoDB's monitor says so; MariaDB's INNODB_TRX and
// INNODB_LOCK_WAITS may not list a transaction that waits on its first
// statement.
func waitForLockWait(t *testing.T, db *sql.DB) {
	t.Helper()
	require.Eventually(t, func() bool {
		var typ, name, status string
		return db.QueryRow("SHOW ENGINE INNODB STATUS").Scan(&typ, &name, &status) == nil && strings.Contains(status, "\nLOCK WAIT ")
	}, 10*time.Second, 5*time.Millisecond, "CheckAll never waited for b's fence row")
}

// TestDoAllBadInput: bad claims, fn, ctx or Guard are ErrInvalid before
// any call to the database.
func TestDoAllBadInput(t *testing.T) {
	var nilCtx context.Context
	ok := []sqlfence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 2}}
	for _, tc := range []struct {
		name   string
		claims []sqlfence.Claim
		msg    string
	}{
		{"nil claims", nil, "no claims"},
		{"no claims", []sqlfence.Claim{}, "no claims"},
		{"one resource, two tokens", []sqlfence.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}, {Resource: "a", Token: 2}}, `resource "a" claimed with two tokens, 1 and 2`},
		{"empty resource", []sqlfence.Claim{{Resource: "a", Token: 1}, {Resource: "", Token: 1}}, "empty resource (claim 1)"},
		{"negative token", []sqlfence.Claim{{Resource: "a", Token: -1}}, "negative token -1 (claim 0)"},
		{"resource over the limit", []sqlfence.Claim{{Resource: strings.Repeat("r", sqlfence.MaxResourceLen+1), Token: 1}}, "limit of 1024"},
		{"NUL in resource", []sqlfence.Claim{{Resource: "a\x00", Token: 1}}, "NUL"},
	} {
		for _, d := range []sqlfence.Dialect{sqlfence.Postgres, sqlfence.MySQL, sqlfence.SQLite} {
			t.Run(fmt.Sprintf("%v: %s", d, tc.name), func(t *testing.T) {
				runBadCase(t, badCase{want: sqlfence.ErrInvalid, msg: []string{tc.msg}, call: func(ctx context.Context, db *sql.DB, tx *sql.Tx) error {
					if err := must(sqlfence.New(db, d)).DoAll(ctx, tc.claims, nop); err == nil || !strings.Contains(err.Error(), tc.msg) {
						return fmt.Errorf("DoAll: %w", err)
					}
					return must(sqlfence.New(db, d)).CheckAll(ctx, tx, tc.claims)
				}})
			})
		}
	}
	for _, tc := range []badCase{
		{name: "nil fn", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).DoAll(ctx, ok, nil)
		}},
		{name: "nil ctx", want: sqlfence.ErrInvalid, call: func(_ context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).DoAll(nilCtx, ok, nop)
		}},
		{name: "nil Guard", want: sqlfence.ErrInvalid, call: func(ctx context.Context, _ *sql.DB, _ *sql.Tx) error {
			return (*sqlfence.Guard)(nil).DoAll(ctx, ok, nop)
		}},
		{name: "zero Guard", want: sqlfence.ErrInvalid, call: func(ctx context.Context, _ *sql.DB, tx *sql.Tx) error {
			return new(sqlfence.Guard).CheckAll(ctx, tx, ok)
		}},
		{name: "nil tx", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.SQLite)).CheckAll(ctx, nil, ok)
		}},
		{name: "cancelled ctx", want: context.Canceled, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return must(sqlfence.New(db, sqlfence.Postgres)).DoAll(ctx, ok, nop)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runBadCase(t, tc) })
	}
}
