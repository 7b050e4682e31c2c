package sqlfence_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/mutex"
)

// hooked runs before and after around db's BeginTx: the ctx can end at
// either point, as a lock's does when it is lost then.
type hooked struct {
	db            *sql.DB
	before, after func()
}

func (h hooked) BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error) {
	h.before()
	tx, err := h.db.BeginTx(ctx, opts)
	h.after()
	return tx, err
}

// TestErrorsCarryTheCause: a write on a lock's context after the lock was
// lost says so (mutex.ErrLockLost) wherever the ended ctx stopped it;
// errors.Is finds the cause and the ctx's own error.
func TestErrorsCarryTheCause(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		e := setup(t, s)
		nop := func() {}
		for _, tc := range []struct {
			name                string
			before, after, inFn bool
		}{
			{name: "before Do"},
			{name: "at begin", before: true},
			{name: "at check", after: true},
			{name: "at commit", inFn: true},
		} {
			t.Run(tc.name, func(t *testing.T) {
				ctx, cancel := context.WithCancelCause(context.Background())
				defer cancel(nil)
				lose := func() { cancel(mutex.ErrLockLost) }
				h := hooked{e.db, nop, nop}
				if tc.before {
					h.before = lose
				}
				if tc.after {
					h.after = lose
				}
				if !tc.before && !tc.after && !tc.inFn {
					lose()
				}
				g := newGuard(t, h, s.dialect, sqlfence.WithTable(e.fences))
				err := g.Do(ctx, "acct:cause", 1, func(ctx context.Context, tx *sql.Tx) error {
					if err := e.insert("acct:cause", 1, "x")(ctx, tx); err != nil {
						return err
					}
					if tc.inFn {
						lose() // the pause: the lock is lost before the commit
					}
					return nil
				})
				require.Error(t, err)
				assert.ErrorIs(t, err, mutex.ErrLockLost, "the cause: %v", err)
				assert.Contains(t, err.Error(), mutex.ErrLockLost.Error())
			})
		}
		assert.Empty(t, e.tags(t), "nothing committed")
	})
}
