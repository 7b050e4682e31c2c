package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/fenced/sqlfence"
)

func TestStaleTokenRejected(t *testing.T) {
	eachVariant(t, func(t *testing.T, s store) {
		e := setup(t, s)
		ctx := context.Background()

		require.NoError(t, e.g.Do(ctx, "acct-1", 5, e.insert("acct-1", 5, "first")))

		called := false
		err := e.g.Do(ctx, "acct-1", 3, func(ctx context.Context, tx *sql.Tx) error {
			called = true
			return e.insert("acct-1", 3, "stale")(ctx, tx)
		})
		require.ErrorIs(t, err, sqlfence.ErrStaleToken)
		require.ErrorIs(t, err, fenced.ErrStaleToken, "one identity across the stores")
		var stale *fenced.StaleTokenError
		require.ErrorAs(t, err, &stale)
		assert.Equal(t, sqlfence.StaleTokenError{Resource: "acct-1", Token: 3, Highest: 5}, *stale)
		assert.False(t, called, "fn must not run for a stale token")

		// The same holder writing again with its token is fine.
		require.NoError(t, e.g.Do(ctx, "acct-1", 5, e.insert("acct-1", 5, "again")))
		// A higher one too, and it raises the fence.
		require.NoError(t, e.g.Do(ctx, "acct-1", 6, e.insert("acct-1", 6, "higher")))
		require.ErrorIs(t, e.g.Do(ctx, "acct-1", 5, e.insert("acct-1", 5, "stale now")), sqlfence.ErrStaleToken)
		// Another resource has its own fence.
		require.NoError(t, e.g.Do(ctx, "acct-2", 1, e.insert("acct-2", 1, "other")))

		assert.Equal(t, []string{"first", "again", "higher", "other"}, e.tags(t))
		assert.Equal(t, int64(6), e.fence(t, "acct-1"))
	})
}

func TestFnErrorAndPanicRollBack(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		e := setup(t, s)
		ctx := context.Background()
		boom := errors.New("boom")

		err := e.g.Do(ctx, "r", 7, func(ctx context.Context, tx *sql.Tx) error {
			if err := e.insert("r", 7, "failed")(ctx, tx); err != nil {
				return err
			}
			return boom
		})
		require.Equal(t, boom, err, "fn's error comes back as it is")

		assert.PanicsWithValue(t, "kaboom", func() {
			_ = e.g.Do(ctx, "r", 8, func(ctx context.Context, tx *sql.Tx) error {
				_ = e.insert("r", 8, "panicked")(ctx, tx)
				panic("kaboom")
			})
		})

		assert.Empty(t, e.tags(t), "nothing of a failed fn is committed")
		assert.Equal(t, int64(-1), e.fence(t, "r"), "the token of a rolled-back Do is not recorded")
		// So a lower token than the failed ones is still accepted.
		require.NoError(t, e.g.Do(ctx, "r", 6, e.insert("r", 6, "ok")))
		// And the pool's connections are all back and usable after the panic.
		require.NoError(t, e.db.PingContext(ctx))
		assert.Zero(t, e.db.Stats().InUse, "a connection was not returned")
		assert.Equal(t, []string{"ok"}, e.tags(t))
	})
}

// TestConcurrentWritersCommitInTokenOrder: 32 goroutines, random tokens, 4
// resources. Each fn also bumps a per-resource counter row; that row's lock
// (SQLite: the database's write lock) orders commits independently of the
// fence, so ordering rows by it gives the commit order, in which accepted
// tokens must never decrease.
func TestConcurrentWritersCommitInTokenOrder(t *testing.T) {
	eachVariant(t, func(t *testing.T, s store) {
		e := setup(t, s)
		res := concurrentWriters(t, e)
		assert.Empty(t, res.outOfOrder, "tokens committed out of order")
		assert.Empty(t, res.errs, "unexpected errors")
		t.Logf("%d accepted, %d rejected", res.accepted, res.rejected)
	})
}

// writersResult is what concurrentWriters saw.
type writersResult struct {
	accepted, rejected int
	outOfOrder         []string // "resource: token t committed after u"
	errs               []error  // other than stale rejections
}

func concurrentWriters(t *testing.T, e *env) writersResult {
	ctx := context.Background()
	counters := e.data + "_seq"
	e.exec(t, `CREATE TABLE `+counters+` (resource `+e.s.text+` PRIMARY KEY, n BIGINT NOT NULL)`+e.s.engine)
	resources := []string{"a", "b", "c", "d"}
	for _, r := range resources {
		e.exec(t, `INSERT INTO `+counters+` (resource, n) VALUES (?, 0)`, r)
	}
	bump := e.s.q(`UPDATE ` + counters + ` SET n = n + 1 WHERE resource = ?`)
	read := e.s.q(`SELECT n FROM ` + counters + ` WHERE resource = ?`)
	write := e.s.q(`INSERT INTO ` + e.data + ` (resource, token, tag, seq) VALUES (?, ?, ?, ?)`)

	const goroutines, perG = 32, 20
	var (
		mu       sync.Mutex
		rejected = map[string]bool{}
		res      writersResult
		wg       sync.WaitGroup
	)
	for w := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range perG {
				r := resources[rng.IntN(len(resources))]
				// Tokens rise with i, in overlapping windows: writers race
				// with near tokens all along, and many are accepted.
				tok := int64(i)*10 + rng.Int64N(40)
				tag := fmt.Sprintf("%d/%d", w, i)
				err := e.g.Do(ctx, r, tok, func(ctx context.Context, tx *sql.Tx) error {
					if _, err := tx.ExecContext(ctx, bump, r); err != nil {
						return err
					}
					var seq int64
					if err := tx.QueryRowContext(ctx, read, r).Scan(&seq); err != nil {
						return err
					}
					_, err := tx.ExecContext(ctx, write, r, tok, tag, seq)
					return err
				})
				mu.Lock()
				var stale *sqlfence.StaleTokenError
				switch {
				case err == nil:
					res.accepted++
				case errors.As(err, &stale):
					assert.Greater(t, stale.Highest, stale.Token, "a rejection names a higher token")
					rejected[tag] = true
					res.rejected++
				default:
					res.errs = append(res.errs, fmt.Errorf("Do(%s, %d): %w", r, tok, err))
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()

	rows, err := e.db.Query(`SELECT resource, token, tag FROM ` + e.data + ` ORDER BY resource, seq`)
	require.NoError(t, err)
	defer rows.Close()
	last := map[string]int64{}
	n := 0
	for rows.Next() {
		var r, tag string
		var tok int64
		require.NoError(t, rows.Scan(&r, &tok, &tag))
		n++
		if prev, ok := last[r]; ok && tok < prev {
			res.outOfOrder = append(res.outOfOrder, fmt.Sprintf("%s: token %d committed after %d", r, tok, prev))
		}
		last[r] = tok
		assert.False(t, rejected[tag], "rejected call %s left a row", tag)
	}
	require.NoError(t, rows.Err())
	assert.Equal(t, res.accepted, n, "every accepted call left exactly its row")
	assert.Equal(t, goroutines*perG, res.accepted+res.rejected+len(res.errs))
	assert.NotZero(t, res.rejected, "random tokens must produce some stale writes")
	return res
}

// TestFirstWriteRace: 16 goroutines race on a resource with no fence row. The
// insert conflict must not surface as an error, the highest token must win,
// and the accepted tokens must not decrease in commit order.
func TestFirstWriteRace(t *testing.T) {
	eachVariant(t, func(t *testing.T, s store) {
		for round := range 5 {
			t.Run(fmt.Sprint(round), func(t *testing.T) {
				e := setup(t, s)
				ctx := context.Background()
				const n = 16
				start := make(chan struct{})
				errs := make([]error, n)
				tokens := rand.Perm(n)
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						<-start
						tok := int64(tokens[i]) / 2 // pairs of equal tokens
						errs[i] = e.g.Do(ctx, "fresh", tok, e.insert("fresh", tok, fmt.Sprint(i)))
					})
				}
				close(start)
				wg.Wait()

				var highest int64
				for i, err := range errs {
					tok := int64(tokens[i]) / 2
					if err != nil {
						require.ErrorIs(t, err, sqlfence.ErrStaleToken, "only stale rejections are allowed")
						continue
					}
					highest = max(highest, tok)
				}
				assert.Equal(t, int64((n-1)/2), highest, "the highest token is always accepted")
				assert.Equal(t, highest, e.fence(t, "fresh"))
				// id is numbered after the fence, under its lock, so it
				// follows commit order.
				committed := column[int64](t, e.db, `SELECT token FROM `+e.data+` ORDER BY id`)
				assert.True(t, slices.IsSorted(committed), "committed tokens %v", committed)
			})
		}
	})
}

// TestCheckInOwnTransaction: Check for callers that run the transaction.
func TestCheckInOwnTransaction(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		e := setup(t, s)
		ctx := context.Background()
		write := func(token int64, tag string) error {
			tx, err := e.db.BeginTx(ctx, nil)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback() }()
			if err := e.g.Check(ctx, tx, "own", token); err != nil {
				return err
			}
			if err := e.insert("own", token, tag)(ctx, tx); err != nil {
				return err
			}
			return tx.Commit()
		}
		require.NoError(t, write(10, "ten"))
		var stale *sqlfence.StaleTokenError
		require.ErrorAs(t, write(9, "nine"), &stale)
		assert.Equal(t, int64(10), stale.Highest)
		assert.Equal(t, []string{"ten"}, e.tags(t))
	})
}

// TestMigrate: idempotent, safe to run at once from several places, and the
// table refuses a negative token written past the guard.
func TestMigrate(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		db := s.open(t)
		ctx := context.Background()
		name := fmt.Sprintf("we\"i`rd %d", tableSeq.Add(1))
		g := newGuard(t, db, s.dialect, sqlfence.WithTable(name))
		require.ErrorIs(t, g.Do(ctx, "x", 1, nop), sqlfence.ErrNotMigrated)
		var wg sync.WaitGroup
		errs := make([]error, 4)
		for i := range errs {
			wg.Go(func() { errs[i] = g.Migrate(ctx) })
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err, "concurrent Migrate")
		}
		require.NoError(t, g.Migrate(ctx), "Migrate again")
		require.NoError(t, g.Do(ctx, "x", 1, nop))
		require.ErrorIs(t, g.Do(ctx, "x", 0, nop), sqlfence.ErrStaleToken)

		quoted := `"we""i` + "`" + `rd ` + name[len("we\"i`rd "):] + `"`
		if s.dialect == sqlfence.MySQL {
			quoted = "`we\"i``rd " + name[len("we\"i`rd "):] + "`"
		}
		_, err := db.ExecContext(ctx, s.q(`INSERT INTO `+quoted+` (resource, token, updated_at) VALUES ('neg', -1, CURRENT_TIMESTAMP)`))
		require.Error(t, err, "CHECK (token >= 0)")
	})
}

func nop(context.Context, *sql.Tx) error { return nil }
