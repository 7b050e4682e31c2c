package sqlfence_test

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced/sqlfence"
)

// TestMigrateAtOnce: replicas that start together each run Migrate on a
// fresh table name: every call returns nil and the table fences after.
// Each replica has a connection of its own, opened beforehand, and all
// start at one signal, over several rounds (on PostgreSQL, without
// Migrate's advisory lock, most of them fail on pg_type's unique index).
func TestMigrateAtOnce(t *testing.T) {
	const replicas, rounds = 12, 4
	eachStore(t, func(t *testing.T, s store) {
		ctx := context.Background()
		db := s.open(t)
		conns := make([]*sql.Conn, replicas)
		for i := range conns {
			c, err := db.Conn(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = c.Close() })
			conns[i] = c
		}
		for round := range rounds {
			table := fmt.Sprintf("migrate_at_once_%d", tableSeq.Add(1))
			guards := make([]*sqlfence.Guard, replicas)
			for i, c := range conns {
				guards[i] = newGuard(t, c, s.dialect, sqlfence.WithTable(table))
			}
			start := make(chan struct{})
			errs := make([]error, replicas)
			var wg sync.WaitGroup
			for i, g := range guards {
				wg.Go(func() {
					<-start
					errs[i] = g.Migrate(ctx)
				})
			}
			close(start)
			wg.Wait()
			for i, err := range errs {
				require.NoError(t, err, "round %d, replica %d", round, i)
			}
			for i, g := range guards {
				require.NoError(t, g.Do(ctx, "r", int64(i+1), nop), "replica %d's guard", i)
			}
			assert.ErrorIs(t, guards[0].Do(ctx, "r", 1, nop), sqlfence.ErrStaleToken)
		}
	})
}
