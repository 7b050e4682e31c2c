package etcddriver_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
)

// The stale holder's fenced write is refused: a holder cut off from the
// cluster lost its lock, the next holder wrote with its larger token (a
// later revision), and the stale holder's late write, in PostgreSQL through
// package fenced, is refused before its function runs.
func TestStaleHolderFencedWriteRefused(t *testing.T) {
	pool := testutil.Postgres(t)
	ctx := testCtx(t)
	guard, err := fenced.New(pool)
	require.NoError(t, err)
	require.NoError(t, guard.Migrate(ctx))
	_, err = pool.Exec(ctx, `CREATE TABLE etcd_ledger (writer text NOT NULL, token bigint NOT NULL)`)
	require.NoError(t, err)
	write := func(writer string, token int64) error {
		// Not the lock's context: a stale holder does not know it is one.
		return guard.Do(context.WithoutCancel(ctx), "invoice-7", token, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO etcd_ledger VALUES ($1, $2)`, writer, token)
			return err
		})
	}

	run := cutOffHolder(t, etcdtest.StartCluster(t, 3))
	require.NoError(t, write("fresh", run.fresh.Token()))
	err = write("stale", run.stale.Token())
	require.ErrorIs(t, err, fenced.ErrStaleToken)
	var stale *fenced.StaleTokenError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, run.stale.Token(), stale.Token)
	assert.Equal(t, run.fresh.Token(), stale.Highest)

	rows, err := pool.Query(ctx, `SELECT writer FROM etcd_ledger ORDER BY token`)
	require.NoError(t, err)
	writers, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"fresh"}, writers, "the stale write never ran")
	require.NoError(t, run.fresh.Release(ctx))
}
