package sqlfence_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"modernc.org/sqlite"

	"github.com/redfence/redfence/fenced/sqlfence"
)

// witness is what a run of read-modify-writes saw: how many committed,
// how many were refused and why, and how far the counter moved. Every
// committed write adds one, so moved < committed counts lost updates.
type witness struct {
	committed, stale, notFirst, busy, moved int64
	errs                                    []error
}

// readModifyWrite runs 16 goroutines of 20 read-modify-writes of one
// counter in their own transactions, each with the next token, as holders
// whose leases ran out one after the other would: read the counter, Check,
// write back what was read plus one; or, with checkFirst, Check before the
// read.
func readModifyWrite(t *testing.T, e *env, counter string, checkFirst bool) witness {
	t.Helper()
	ctx := context.Background()
	start := column[int64](t, e.db, `SELECT n FROM `+counter)[0]
	var (
		tokens atomic.Int64
		mu     sync.Mutex
		w      witness
		wg     sync.WaitGroup
	)
	tokens.Store(start * 1000) // above every token of an earlier run
	once := func() error {
		tx, err := e.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		tok := tokens.Add(1)
		var n int64
		read := func() error { return tx.QueryRowContext(ctx, `SELECT n FROM `+counter).Scan(&n) }
		if !checkFirst {
			if err := read(); err != nil {
				return err
			}
		}
		if err := e.g.Check(ctx, tx, "counter", tok); err != nil {
			return err
		}
		if checkFirst {
			if err := read(); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, e.s.q(`UPDATE `+counter+` SET n = ?`), n+1); err != nil {
			return err
		}
		return tx.Commit()
	}
	for range 16 {
		wg.Go(func() {
			for range 20 {
				err := once()
				var liteErr *sqlite.Error
				mu.Lock()
				switch {
				case err == nil:
					w.committed++
				case errors.Is(err, sqlfence.ErrStaleToken):
					w.stale++
				case errors.Is(err, sqlfence.ErrCheckNotFirst):
					w.notFirst++
				case errors.As(err, &liteErr) && liteErr.Code()&0xff == 5: // SQLITE_BUSY and its extended codes
					w.busy++
				default:
					w.errs = append(w.errs, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	w.moved = column[int64](t, e.db, `SELECT n FROM `+counter)[0] - start
	t.Logf("check first %v: %d committed, counter moved %d; %d stale, %d read before Check, %d busy, %d other errors",
		checkFirst, w.committed, w.moved, w.stale, w.notFirst, w.busy, len(w.errs))
	return w
}

// TestCheckAfterRead: at each database's default isolation level, a
// read-modify-write that reads before Check loses no update: PostgreSQL
// refuses every such Check (ErrCheckNotFirst), MySQL those whose read is
// older than the resource's last write (ErrCheckNotFirst), SQLite lets no
// deferred transaction that read take the write lock behind another
// writer (SQLITE_BUSY); and with Check first, no update is lost and none
// is refused for its read.
func TestCheckAfterRead(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		e := setup(t, s)
		counter := e.data + "_counter"
		e.exec(t, `CREATE TABLE `+counter+` (n BIGINT NOT NULL)`+s.engine)
		e.exec(t, `INSERT INTO `+counter+` (n) VALUES (1)`)

		w := readModifyWrite(t, e, counter, false)
		assert.Empty(t, w.errs)
		assert.Equal(t, w.committed, w.moved, "lost updates")
		switch s.dialect {
		case sqlfence.Postgres:
			assert.Equal(t, int64(16*20), w.notFirst, "every Check after a read is refused")
		case sqlfence.MySQL:
			assert.Zero(t, w.busy)
		case sqlfence.SQLite:
			assert.Zero(t, w.notFirst)
		}

		w = readModifyWrite(t, e, counter, true)
		assert.Empty(t, w.errs)
		assert.Zero(t, w.notFirst)
		assert.Zero(t, w.busy)
		assert.NotZero(t, w.committed)
		assert.Equal(t, w.committed, w.moved, "lost updates")
	})
}

// TestCheckAfterStaleRead: one transaction reads, a write of the resource
// commits, then the transaction calls Check: refused, nothing recorded.
// Without that write in between, MySQL accepts the Check (the read is
// current), PostgreSQL refuses it all the same (it cannot tell).
func TestCheckAfterStaleRead(t *testing.T) {
	for _, s := range []store{stores[0], stores[1], variants[2]} {
		t.Run(s.name, func(t *testing.T) {
			e := setup(t, s)
			ctx := context.Background()
			require.NoError(t, e.g.Do(ctx, "r", 1, e.insert("r", 1, "first")))
			begin := func() *sql.Tx {
				tx, err := e.db.BeginTx(ctx, nil)
				require.NoError(t, err)
				t.Cleanup(func() { _ = tx.Rollback() })
				var n int
				require.NoError(t, tx.QueryRowContext(ctx, `SELECT count(*) FROM `+e.data).Scan(&n))
				return tx
			}

			tx := begin()
			require.NoError(t, e.g.Do(ctx, "r", 2, e.insert("r", 2, "meanwhile")))
			err := e.g.Check(ctx, tx, "r", 3)
			require.ErrorIs(t, err, sqlfence.ErrCheckNotFirst)
			assert.NotErrorIs(t, err, sqlfence.ErrStaleToken)
			require.NoError(t, tx.Rollback())
			assert.Equal(t, int64(2), e.fence(t, "r"), "nothing recorded")

			tx = begin()
			err = e.g.Check(ctx, tx, "r", 3)
			if s.dialect == sqlfence.MySQL {
				require.NoError(t, err, "a read no write has overtaken")
				require.NoError(t, tx.Commit())
				assert.Equal(t, int64(3), e.fence(t, "r"))
			} else {
				require.ErrorIs(t, err, sqlfence.ErrCheckNotFirst)
			}
		})
	}
}
