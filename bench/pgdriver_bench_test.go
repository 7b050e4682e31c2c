package bench

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend/pgdriver"
)

// BenchmarkPGLockPaired is one uncontended Lock+Release on pgdriver,
// paired in one run with PostgreSQL's session advisory lock
// (pg_advisory_lock and pg_advisory_unlock on one pooled connection: the
// floor a PostgreSQL user compares with), with redfence on one Redis, and
// the advisory lock with itself (the harness's bias).
func BenchmarkPGLockPaired(b *testing.B) {
	ctx := context.Background()
	pool := testutil.Postgres(b)
	d, err := pgdriver.New(pool)
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	l, err := mutex.New(d)
	if err != nil {
		b.Fatal(err)
	}
	s := startServers(b)
	all := map[string]subject{
		"pgdriver": redfenceSubject(b, "pgdriver", l),
		"advisory": advisorySubject(pool),
		"redfence": redfenceSubject(b, "redfence", newLocker(b, s.client(b, s.one))),
	}
	pairs := [][2]string{{"pgdriver", "advisory"}, {"pgdriver", "redfence"}, {"advisory", "advisory"}}
	runPairs(ctx, b, all, pairs, "seq", "parallel")
}

// advisorySubject takes a session advisory lock on a connection of pool,
// held until the unlock gives the connection back.
func advisorySubject(pool *pgxpool.Pool) subject {
	return subject{"advisory", func(ctx context.Context, key string) (func() error, error) {
		c, err := pool.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := c.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", key); err != nil {
			c.Release()
			return nil, err
		}
		return func() error {
			defer c.Release()
			_, err := c.Exec(ctx, "SELECT pg_advisory_unlock(hashtext($1))", key)
			return err
		}, nil
	}}
}
