package fenced_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// TestMigrateAtOnce: replicas that start together each run Migrate, on a
// fresh schema: every call returns nil, one table is created, and it
// fences. Two concurrent CREATE TABLE IF NOT EXISTS of one name can both
// miss the table and one then fails on pg_type's unique index (SQLSTATE
// 23505); Migrate's advisory lock makes them take turns. Each replica has
// a connection of its own, opened beforehand, and all start at one
// signal, over several rounds, so that without the lock the race is run
// often enough to lose.
func TestMigrateAtOnce(t *testing.T) {
	const replicas, rounds = 16, 6
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL(t))
	require.NoError(t, err)
	cfg.MaxConns = replicas
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	conns := make([]*pgxpool.Conn, replicas)
	for i := range conns {
		conns[i], err = pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(conns[i].Release)
	}
	nop := func(context.Context, pgx.Tx) error { return nil }

	for round := range rounds {
		schema := fmt.Sprintf("migrate_at_once_%d", tableSeq.Add(1))
		_, err := conns[0].Exec(ctx, `CREATE SCHEMA `+schema)
		require.NoError(t, err)
		guards := make([]*fenced.Guard, replicas)
		for i, c := range conns {
			guards[i] = newGuard(t, c, fenced.WithTable(schema+".fences"))
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

		var tables int
		require.NoError(t, conns[0].QueryRow(ctx, `SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&tables))
		assert.Equal(t, 1, tables)
		for i, g := range guards {
			require.NoError(t, g.Do(ctx, "r", int64(i+1), nop), "replica %d's guard", i)
		}
		assert.ErrorIs(t, guards[0].Do(ctx, "r", 1, nop), fenced.ErrStaleToken)
	}
}
