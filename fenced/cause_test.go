package fenced_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
)

// beginAfter runs hook, then begins on db: the ctx can end between Do's
// own check and its BEGIN, as a lock's does when it is lost then.
type beginAfter struct {
	db   fenced.Beginner
	hook func()
}

func (b beginAfter) Begin(ctx context.Context) (pgx.Tx, error) {
	b.hook()
	return b.db.Begin(ctx)
}

// TestErrorsCarryTheCause: a write on a lock's context after the lock was
// lost says so (mutex.ErrLockLost) wherever the ended ctx stopped it, not
// only "context canceled"; errors.Is finds both.
func TestErrorsCarryTheCause(t *testing.T) {
	pool, g, fences, data := setup(t)
	for _, tc := range []struct {
		name string
		do   func(ctx context.Context, lose func()) error
	}{
		{"before Do", func(ctx context.Context, lose func()) error {
			lose()
			return g.Do(ctx, "acct:cause", 1, insert(data, "acct:cause", 1, "x"))
		}},
		{"at begin", func(ctx context.Context, lose func()) error {
			gb := newGuard(t, beginAfter{pool, lose}, fenced.WithTable(fences))
			return gb.Do(ctx, "acct:cause", 1, insert(data, "acct:cause", 1, "x"))
		}},
		{"at commit", func(ctx context.Context, lose func()) error {
			return g.Do(ctx, "acct:cause", 1, func(ctx context.Context, tx pgx.Tx) error {
				if err := insert(data, "acct:cause", 1, "x")(ctx, tx); err != nil {
					return err
				}
				lose() // the pause: the lock is lost before the commit
				return nil
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)
			err := tc.do(ctx, func() { cancel(mutex.ErrLockLost) })
			require.Error(t, err)
			assert.ErrorIs(t, err, mutex.ErrLockLost, "the cause: %v", err)
			assert.ErrorIs(t, err, context.Canceled, "ctx's own error: %v", err)
			assert.Contains(t, err.Error(), mutex.ErrLockLost.Error())
		})
	}
	assert.Empty(t, tags(t, pool, data), "nothing committed")
}
