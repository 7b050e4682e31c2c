package fenced_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
)

// witness is what a run of read-modify-writes saw: how many committed,
// how many were refused and why, and how far the counter moved. Every
// committed write adds one, so moved < committed counts lost updates.
type witness struct {
	committed, stale, notFirst, moved int64
	errs                              []error
}

// readModifyWrite runs 16 goroutines of 20 read-modify-writes of one
// counter in their own transactions, each with the next token, as holders
// whose leases ran out one after the other would: read the counter, Check,
// write back what was read plus one; or, with checkFirst, Check before the
// read.
func readModifyWrite(t *testing.T, pool *pgxpool.Pool, g *fenced.Guard, counter string, checkFirst bool) witness {
	t.Helper()
	ctx := context.Background()
	var start int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT n FROM `+counter).Scan(&start))
	var (
		tokens atomic.Int64
		mu     sync.Mutex
		w      witness
		wg     sync.WaitGroup
	)
	tokens.Store(start * 1000) // above every token of an earlier run
	for range 16 {
		wg.Go(func() {
			for range 20 {
				err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
					tok := tokens.Add(1)
					var n int64
					read := func() error { return tx.QueryRow(ctx, `SELECT n FROM `+counter).Scan(&n) }
					if !checkFirst {
						if err := read(); err != nil {
							return err
						}
					}
					if err := g.Check(ctx, tx, "counter", tok); err != nil {
						return err
					}
					if checkFirst {
						if err := read(); err != nil {
							return err
						}
					}
					_, err := tx.Exec(ctx, `UPDATE `+counter+` SET n = $1`, n+1)
					return err
				})
				mu.Lock()
				switch {
				case err == nil:
					w.committed++
				case errors.Is(err, fenced.ErrStaleToken):
					w.stale++
				case errors.Is(err, fenced.ErrCheckNotFirst):
					w.notFirst++
				default:
					w.errs = append(w.errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var end int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT n FROM `+counter).Scan(&end))
	w.moved = end - start
	t.Logf("check first %v: %d committed, counter moved %d; %d stale, %d read before Check, %d other errors",
		checkFirst, w.committed, w.moved, w.stale, w.notFirst, len(w.errs))
	return w
}

// TestCheckAfterReadRefused: a read-modify-write that reads before Check,
// at PostgreSQL's default level, would lose the updates committed while it
// waited for the fence row; Check refuses it with ErrCheckNotFirst, and
// nothing is written. With Check first, no update is lost.
func TestCheckAfterReadRefused(t *testing.T) {
	pool, g, _, data := setup(t)
	ctx := context.Background()
	counter := data + "_counter"
	_, err := pool.Exec(ctx, `CREATE TABLE `+counter+` (n bigint NOT NULL); INSERT INTO `+counter+` VALUES (1)`)
	require.NoError(t, err)

	w := readModifyWrite(t, pool, g, counter, false)
	assert.Empty(t, w.errs)
	assert.Equal(t, int64(16*20), w.notFirst, "every Check after a read is refused")
	assert.Equal(t, w.committed, w.moved, "lost updates")

	w = readModifyWrite(t, pool, g, counter, true)
	assert.Empty(t, w.errs)
	assert.Zero(t, w.notFirst)
	assert.NotZero(t, w.committed)
	assert.Equal(t, w.committed, w.moved, "lost updates")
}

// TestCheckAfterWhat: what counts as a read before Check, and what does
// not, in a transaction and in a savepoint.
func TestCheckAfterWhat(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	other := newGuard(t, pool, fenced.WithTable(fences+"_other"))
	require.NoError(t, other.Migrate(ctx))
	// parent and child: a foreign key; theirs: a table the other fence
	// protects.
	parent, child, theirs := data+"_parent", data+"_child", data+"_theirs"
	_, err := pool.Exec(ctx, `CREATE TABLE `+parent+` (id int PRIMARY KEY); INSERT INTO `+parent+` VALUES (1), (2);
		CREATE TABLE `+child+` (id int PRIMARY KEY, parent int NOT NULL REFERENCES `+parent+`);
		CREATE TABLE `+theirs+` (id int PRIMARY KEY)`)
	require.NoError(t, err)
	require.NoError(t, other.Protect(ctx, theirs, `'t:' || id`))
	exec := func(q string) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error { _, err := tx.Exec(ctx, q); return err }
	}
	for _, tc := range []struct {
		name   string
		before func(tx pgx.Tx) error
		want   error
	}{
		{"nothing", func(pgx.Tx) error { return nil }, nil},
		{"a SELECT", func(tx pgx.Tx) error { _, err := tx.Exec(ctx, `SELECT * FROM `+data); return err }, fenced.ErrCheckNotFirst},
		{"a SELECT FOR UPDATE", func(tx pgx.Tx) error { _, err := tx.Exec(ctx, `SELECT * FROM `+data+` FOR UPDATE`); return err }, fenced.ErrCheckNotFirst},
		{"a catalog read", func(tx pgx.Tx) error { _, err := tx.Exec(ctx, `SELECT count(*) FROM pg_class`); return err }, nil},
		{"a write", func(tx pgx.Tx) error { return insert(data, "w", 1, "before")(ctx, tx) }, nil},
		// A foreign key's check locks the row it references (FOR KEY
		// SHARE), as a delete's locks the rows that reference it.
		{"a write with a foreign key", exec(`INSERT INTO ` + child + ` VALUES (1, 1)`), nil},
		{"a delete checked by a foreign key", exec(`DELETE FROM ` + parent + ` WHERE id = 2`), nil},
		{"a read of the table a write referenced", exec(`INSERT INTO ` + child + ` VALUES (1, 1); SELECT * FROM ` + parent), fenced.ErrCheckNotFirst},
		// Documented: not told from the foreign key's own lock.
		{"a SELECT FOR UPDATE of the table a write referenced", exec(`INSERT INTO ` + child + ` VALUES (1, 1); SELECT * FROM ` + parent + ` FOR UPDATE`), nil},
		{"a read of a table written before", exec(`INSERT INTO ` + child + ` VALUES (1, 1); SELECT * FROM ` + child), fenced.ErrCheckNotFirst},
		{"a write that reads another table", exec(`INSERT INTO ` + child + ` SELECT id, id FROM ` + parent), fenced.ErrCheckNotFirst},
		// Its trigger reads its fence table.
		{"a write to a table another fence protects", func(tx pgx.Tx) error {
			if err := other.Check(ctx, tx, "t:1", 1); err != nil {
				return err
			}
			return exec(`INSERT INTO ` + theirs + ` VALUES (1)`)(tx)
		}, nil},
		{"a read of a table another fence protects", func(tx pgx.Tx) error {
			if err := other.Check(ctx, tx, "t:1", 1); err != nil {
				return err
			}
			return exec(`SELECT * FROM ` + theirs)(tx)
		}, fenced.ErrCheckNotFirst},
		{"another fence's Check", func(tx pgx.Tx) error { return other.Check(ctx, tx, "r", 1) }, nil},
		{"this fence's Check of another resource", func(tx pgx.Tx) error { return g.Check(ctx, tx, "r2", 1) }, nil},
		{"this fence's stale Check, in a savepoint", func(tx pgx.Tx) error {
			sp, err := tx.Begin(ctx)
			if err != nil {
				return err
			}
			if err := g.Check(ctx, sp, "r", 0); !errors.Is(err, fenced.ErrStaleToken) {
				return err
			}
			return sp.Rollback(ctx)
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, g.Do(ctx, "r", 5, func(context.Context, pgx.Tx) error { return nil }))
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			require.NoError(t, tc.before(tx))
			err = g.Check(ctx, tx, "r", 6)
			if tc.want == nil {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, tc.want)
			assert.NotErrorIs(t, err, fenced.ErrStaleToken)
			assert.Contains(t, err.Error(), `"r"`)
		})
	}

	// In a savepoint, the enclosing transaction's read counts; so it does
	// for Do over a pgx.Tx, whose transaction is a savepoint.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT * FROM `+data)
	require.NoError(t, err)
	sp, err := tx.Begin(ctx)
	require.NoError(t, err)
	require.ErrorIs(t, g.Check(ctx, sp, "r", 7), fenced.ErrCheckNotFirst)
	require.NoError(t, sp.Rollback(ctx))
	nested := newGuard(t, tx, fenced.WithTable(fences))
	require.ErrorIs(t, nested.Do(ctx, "r", 7, insert(data, "r", 7, "nested")), fenced.ErrCheckNotFirst)
	require.NoError(t, tx.Rollback(ctx))
	assert.Empty(t, tags(t, pool, data))
}
