package chaoskit

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// Register is the fenced resource: a counter that a read-modify-write
// under the lock's token increments, in one of the stores fenced supports.
type Register interface {
	// RMW reads the counter and writes it plus one, fenced by token, and
	// appends token to the accepted list in the same atomic step; an error
	// matching fenced.ErrStaleToken means nothing changed.
	RMW(ctx context.Context, token int64) (read int64, err error)
	// Accepted are the tokens of the accepted writes, in commit order.
	Accepted(ctx context.Context) ([]int64, error)
	Value(ctx context.Context) (int64, error)
}

// pgRegister is a row of a PostgreSQL table under fenced.Guard, the table
// protected by its trigger, so the suite also runs the trigger's check
// under its faults.
type pgRegister struct {
	pool  *pgxpool.Pool
	guard *fenced.Guard
	table string
}

// PGRegister is a register in the test package's PostgreSQL database
// (testutil.Postgres), in tables named after name, dropped at t's clean-up
// so that the test can run again in the same database (go test -count).
func PGRegister(t *testing.T, name string) Register {
	pool := testutil.Postgres(t)
	ctx := context.Background()
	table := "register_" + name
	_, err := pool.Exec(ctx, `CREATE TABLE `+table+` (id int PRIMARY KEY, v bigint NOT NULL);
		INSERT INTO `+table+` VALUES (1, 0);
		CREATE TABLE `+table+`_accepted (seq bigserial PRIMARY KEY, token bigint NOT NULL)`)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, err := pool.Exec(context.Background(), `DROP TABLE IF EXISTS `+table+`, `+table+`_accepted, fences_`+name)
		assert.NoError(t, err)
	})
	g, err := fenced.New(pool, fenced.WithTable("fences_"+name))
	require.NoError(t, err)
	require.NoError(t, g.Migrate(ctx))
	require.NoError(t, g.Protect(ctx, table, `'register'`))
	return &pgRegister{pool: pool, guard: g, table: table}
}

func (r *pgRegister) RMW(ctx context.Context, token int64) (read int64, err error) {
	err = r.guard.Do(ctx, "register", token, func(ctx context.Context, tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT v FROM `+r.table+` WHERE id = 1 FOR UPDATE`).Scan(&read); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE `+r.table+` SET v = v + 1 WHERE id = 1`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO `+r.table+`_accepted (token) VALUES ($1)`, token)
		return err
	})
	return read, err
}

func (r *pgRegister) Accepted(ctx context.Context) ([]int64, error) {
	rows, err := r.pool.Query(ctx, `SELECT token FROM `+r.table+`_accepted ORDER BY seq`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

func (r *pgRegister) Value(ctx context.Context) (v int64, err error) {
	err = r.pool.QueryRow(ctx, `SELECT v FROM `+r.table+` WHERE id = 1`).Scan(&v)
	return v, err
}
