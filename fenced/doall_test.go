package fenced_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
)

// transfer moves amount from one account row to another, in the order
// given: the order a caller thinks of them in, not the fence's.
func transfer(table, from, to string, amount int) func(context.Context, pgx.Tx) error {
	return func(ctx context.Context, tx pgx.Tx) error {
		for _, step := range []struct {
			id    string
			delta int
		}{{from, -amount}, {to, amount}} {
			if _, err := tx.Exec(ctx, `UPDATE `+table+` SET balance = balance + $1 WHERE id = $2`, step.delta, step.id); err != nil {
				return err
			}
		}
		return nil
	}
}

// pairs runs rounds of two DoAll calls at once, one claiming a and b, the
// other b and a, released together; a and b are fresh resources each round
// (fresh) or two of four accounts that exist. It returns every error seen.
// Without the canonical order PostgreSQL finds deadlocks (40P01) here.
func pairs(t *testing.T, g *fenced.Guard, accounts string, fresh bool) []error {
	t.Helper()
	const pairsAtOnce, rounds = 4, 40
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
						claims := []fenced.Claim{{Resource: c[0], Token: 1}, {Resource: c[1], Token: 1}}
						if err := g.DoAll(context.Background(), claims, transfer(accounts, c[0], c[1], 1)); err != nil {
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

// TestDoAllOppositeOrdersDoNotDeadlock: DoAll calls that name the same
// resources in opposite orders, many at once, all commit: the fence takes
// its rows in one order, so no two wait for each other in a cycle, both on
// rows that exist and on rows the calls create. Mutation: record the claims
// in the caller's order (fence.Canonical without its sort) and PostgreSQL
// reports deadlocks (40P01).
func TestDoAllOppositeOrdersDoNotDeadlock(t *testing.T) {
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			pool, g, _, data := setup(t)
			accounts := data + "_acct"
			_, err := pool.Exec(context.Background(), `CREATE TABLE `+accounts+` (id text PRIMARY KEY, balance int NOT NULL);
				INSERT INTO `+accounts+` VALUES ('0', 100), ('1', 100), ('2', 100), ('3', 100)`)
			require.NoError(t, err)

			errs := pairs(t, g, accounts, fresh)
			assert.Zero(t, len(errs), "errors, the first: %v", first(errs))
			var total int
			require.NoError(t, pool.QueryRow(context.Background(), `SELECT sum(balance) FROM `+accounts).Scan(&total))
			assert.Equal(t, 400, total, "money appeared or vanished")
		})
	}
}

func first(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errs[0]
}

// TestDoAllOneStaleClaimRefusesAll: whichever claim is stale, first, in the
// middle or last in the fence's order, DoAll returns the error Do would for
// that claim alone, fn never runs, and nothing is written: no row, and no
// token of the other claims, though they were higher. Mutation: check only
// the first claim, and the middle and last cases commit.
func TestDoAllOneStaleClaimRefusesAll(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	resources := []string{"a", "b", "c"}
	for _, r := range resources {
		require.NoError(t, g.Do(ctx, r, 5, func(context.Context, pgx.Tx) error { return nil }))
	}
	for _, stale := range resources {
		t.Run("stale "+stale, func(t *testing.T) {
			var claims []fenced.Claim
			for _, r := range []string{"c", "b", "a"} { // the caller's order, not the fence's
				tok := int64(6)
				if r == stale {
					tok = 4
				}
				claims = append(claims, fenced.Claim{Resource: r, Token: tok})
			}
			called := false
			err := g.DoAll(ctx, claims, func(ctx context.Context, tx pgx.Tx) error {
				called = true
				for _, c := range claims {
					if err := insert(data, c.Resource, c.Token, "all")(ctx, tx); err != nil {
						return err
					}
				}
				return nil
			})
			var se *fenced.StaleTokenError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, fenced.StaleTokenError{Resource: stale, Token: 4, Highest: 5}, *se)
			alone := g.Do(ctx, stale, 4, func(context.Context, pgx.Tx) error { return nil })
			assert.Equal(t, alone.Error(), err.Error(), "the error a single stale claim gives")
			assert.False(t, called, "fn ran")
			assert.Empty(t, tags(t, pool, data), "a row was written")
			assert.Equal(t, "a=5,b=5,c=5", fenceRows(t, pool, fences), "a token was recorded")
		})
	}
	// All current: every token is recorded with fn's rows.
	require.NoError(t, g.DoAll(ctx, []fenced.Claim{{Resource: "c", Token: 7}, {Resource: "a", Token: 5}, {Resource: "c", Token: 7}},
		insert(data, "a", 5, "ok")))
	assert.Equal(t, []string{"ok"}, tags(t, pool, data))
	assert.Equal(t, "a=5,b=5,c=7", fenceRows(t, pool, fences))
}

func fenceRows(t *testing.T, pool *pgxpool.Pool, fences string) string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT resource || '=' || token FROM `+fences+` ORDER BY resource`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return strings.Join(out, ",")
}

// TestDoAllProtectedTable: a table under Protect accepts, in one DoAll, the
// rows of every claimed resource, one statement over several of them
// included, and still refuses a row of a resource not claimed, naming it:
// nothing of that transaction stays.
func TestDoAllProtectedTable(t *testing.T) {
	pool, g, accounts, _ := protected(t)
	ctx := context.Background()
	_, err := pool.Exec(ctx, `BEGIN; SET LOCAL redfence.bypass = 'seed'; INSERT INTO `+accounts+` VALUES (3, 100); COMMIT`)
	require.NoError(t, err)
	both := []fenced.Claim{{Resource: "account:2", Token: 1}, {Resource: "account:1", Token: 1}}

	require.NoError(t, g.DoAll(ctx, both, transfer(accounts, "1", "2", 10)))
	require.NoError(t, g.DoAll(ctx, both, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+accounts+` SET balance = balance + 1 WHERE id IN (1, 2)`)
		return err
	}))
	assert.Equal(t, "1=91,2=111,3=100", balances(t, pool, accounts))

	err = g.DoAll(ctx, both, transfer(accounts, "1", "3", 10))
	require.ErrorIs(t, err, fenced.ErrNoToken)
	assert.Contains(t, err.Error(), `"account:3"`)
	assert.Equal(t, "1=91,2=111,3=100", balances(t, pool, accounts), "the refused transaction left a write")
}

// TestCheckAll: CheckAll in a transaction of the caller's records every
// claim, refuses a stale one naming it, and refuses to follow a read.
func TestCheckAll(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	claims := []fenced.Claim{{Resource: "y", Token: 3}, {Resource: "x", Token: 2}}
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if err := g.CheckAll(ctx, tx, claims); err != nil {
			return err
		}
		return insert(data, "x", 2, "checked")(ctx, tx)
	}))
	assert.Equal(t, "x=2,y=3", fenceRows(t, pool, fences))

	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		return g.CheckAll(ctx, tx, []fenced.Claim{{Resource: "x", Token: 2}, {Resource: "y", Token: 1}})
	})
	var se *fenced.StaleTokenError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, fenced.StaleTokenError{Resource: "y", Token: 1, Highest: 3}, *se)

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT count(*) FROM `+data); err != nil {
			return err
		}
		return g.CheckAll(ctx, tx, claims)
	})
	require.ErrorIs(t, err, fenced.ErrCheckNotFirst)
	assert.Contains(t, err.Error(), `"x" and 1 more`)
	assert.Equal(t, []string{"checked"}, tags(t, pool, data))
}

// TestDoAllBadInput: bad claims, fn, ctx or Guard are ErrInvalid, and no
// call reaches the database.
func TestDoAllBadInput(t *testing.T) {
	nop := func(context.Context, pgx.Tx) error { return nil }
	var nilCtx context.Context
	ok := []fenced.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 2}}
	for _, tc := range []struct {
		name   string
		claims []fenced.Claim
		msg    string
	}{
		{"nil claims", nil, "no claims"},
		{"no claims", []fenced.Claim{}, "no claims"},
		{"one resource, two tokens", []fenced.Claim{{Resource: "a", Token: 1}, {Resource: "b", Token: 1}, {Resource: "a", Token: 2}}, `resource "a" claimed with two tokens, 1 and 2`},
		{"empty resource", []fenced.Claim{{Resource: "a", Token: 1}, {Resource: "", Token: 1}}, "empty resource (claim 1)"},
		{"negative token", []fenced.Claim{{Resource: "a", Token: -1}}, "negative token -1 (claim 0)"},
		{"resource over the limit", []fenced.Claim{{Resource: strings.Repeat("r", fenced.MaxResourceLen+1), Token: 1}}, "limit of 1024"},
		{"NUL in resource", []fenced.Claim{{Resource: "a\x00", Token: 1}}, "NUL"},
		{"invalid UTF-8", []fenced.Claim{{Resource: "a\xff", Token: 1}}, "UTF-8"},
	} {
		t.Run("DoAll: "+tc.name, func(t *testing.T) {
			runBadCase(t, badCase{want: fenced.ErrInvalid, msg: []string{tc.msg}, call: func(ctx context.Context, sp *spy) error {
				return must(fenced.New(sp)).DoAll(ctx, tc.claims, nop)
			}})
		})
		t.Run("CheckAll: "+tc.name, func(t *testing.T) {
			runBadCase(t, badCase{want: fenced.ErrInvalid, msg: []string{tc.msg}, call: func(ctx context.Context, sp *spy) error {
				return must(fenced.New(sp)).CheckAll(ctx, sp, tc.claims)
			}})
		})
	}
	for _, tc := range []badCase{
		{name: "nil fn", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).DoAll(ctx, ok, nil)
		}},
		{name: "nil ctx", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return must(fenced.New(sp)).DoAll(nilCtx, ok, nop)
		}},
		{name: "nil Guard", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return (*fenced.Guard)(nil).DoAll(ctx, ok, nop)
		}},
		{name: "zero Guard", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return new(fenced.Guard).CheckAll(ctx, sp, ok)
		}},
		{name: "nil tx", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).CheckAll(ctx, nil, ok)
		}},
		{name: "typed nil tx", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).CheckAll(ctx, (*spy)(nil), ok)
		}},
		{name: "cancelled ctx", want: context.Canceled, call: func(ctx context.Context, sp *spy) error {
			ctx, cancel := context.WithCancel(ctx)
			cancel()
			return must(fenced.New(sp)).DoAll(ctx, ok, nop)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) { runBadCase(t, tc) })
	}
}
