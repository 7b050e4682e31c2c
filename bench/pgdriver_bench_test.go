package bench

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
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

// BenchmarkPGWaiters: 32 goroutines over 2 Lockers (each with its own
// pool, as 2 processes would) take one key in turn and release it at once,
// on pgdriver polling (as behind PgBouncer's transaction mode), on
// pgdriver woken by LISTEN/NOTIFY (WithListener), and on redfence over
// Redis in the same run. It reports what contend does: the wait
// distribution, round trips per acquisition (pgx statements, Redis
// commands and pipelines) and acquisitions per second.
func BenchmarkPGWaiters(b *testing.B) {
	ctx := context.Background()
	url := testutil.PostgresURL(b)
	migrate, err := pgdriver.New(testutil.Postgres(b), pgdriver.WithSchema("bench_waiters"))
	if err != nil {
		b.Fatal(err)
	}
	if err := migrate.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	for _, name := range []string{"pgdriver-poll", "pgdriver-listen", "redfence"} {
		b.Run("g=32/lockers=2/"+name, func(b *testing.B) {
			rtt := &counter{}
			var subs []subject
			if name == "redfence" {
				s := startServers(b)
				rtt = s.rtt
				for range 2 {
					subs = append(subs, redfenceSubject(b, name, newLocker(b, s.client(b, s.one))))
				}
				contend(ctx, b, 32, subs, nil, rtt)
				return
			}
			for range 2 {
				cfg, err := pgxpool.ParseConfig(url)
				if err != nil {
					b.Fatal(err)
				}
				cfg.ConnConfig.Tracer = rtt
				pool, err := pgxpool.NewWithConfig(ctx, cfg)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(pool.Close)
				opts := []pgdriver.Option{pgdriver.WithSchema("bench_waiters")}
				if name == "pgdriver-listen" {
					opts = append(opts, pgdriver.WithListener(url))
				}
				d, err := pgdriver.New(pool, opts...)
				if err != nil {
					b.Fatal(err)
				}
				l, err := mutex.New(d)
				if err != nil {
					b.Fatal(err)
				}
				subs = append(subs, redfenceSubject(b, name, l))
			}
			contend(ctx, b, 32, subs, nil, rtt)
		})
	}
}
