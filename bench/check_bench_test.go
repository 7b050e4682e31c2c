package bench

import (
	"context"
	"database/sql"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/testutil"
)

// BenchmarkCheckPaired: a transaction of the caller's own, Check then one
// INSERT, against the same write through Do, in alternating blocks inside
// one benchmark: what Check's refusal of a transaction that read before it
// costs (PostgreSQL: a query on pg_locks; MySQL: locking the fence row and
// reading it twice; SQLite: nothing). Named <guard>/<mode>/check-vs-do.
func BenchmarkCheckPaired(b *testing.B) {
	ctx := context.Background()
	b.Run("pgx", func(b *testing.B) {
		pool := testutil.Postgres(b)
		if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_check_rows (id bigserial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL)`); err != nil {
			b.Fatal(err)
		}
		g, err := fenced.New(pool, fenced.WithTable("bench_check_fences"))
		if err != nil {
			b.Fatal(err)
		}
		if err := g.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		const insert = `INSERT INTO bench_check_rows (resource, token) VALUES ($1, $2)`
		do := func(res string) error {
			return g.Do(ctx, res, 1, func(ctx context.Context, tx pgx.Tx) error {
				_, err := tx.Exec(ctx, insert, res, 1)
				return err
			})
		}
		check := func(res string) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
				if err := g.Check(ctx, tx, res, 1); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, insert, res, 1)
				return err
			})
		}
		checkModes(b, do, check)
	})
	for _, d := range sqlDialects {
		b.Run(d.name, func(b *testing.B) {
			db, err := sql.Open(d.driver, d.dsn(b))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(ctx, d.create); err != nil {
				b.Fatal(err)
			}
			g, err := sqlfence.New(db, d.dialect, sqlfence.WithTable("bench_sql_fences"))
			if err != nil {
				b.Fatal(err)
			}
			if err := g.Migrate(ctx); err != nil {
				b.Fatal(err)
			}
			write := func(ctx context.Context, tx *sql.Tx, res string) error {
				_, err := tx.ExecContext(ctx, d.insert, res, 1)
				return err
			}
			do := func(res string) error {
				return g.Do(ctx, res, 1, func(ctx context.Context, tx *sql.Tx) error { return write(ctx, tx, res) })
			}
			check := func(res string) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer func() { _ = tx.Rollback() }()
				if err := g.Check(ctx, tx, res, 1); err != nil {
					return err
				}
				if err := write(ctx, tx, res); err != nil {
					return err
				}
				return tx.Commit()
			}
			checkModes(b, do, check)
		})
	}
}

func checkModes(b *testing.B, do, check func(string) error) {
	for _, par := range []int{1, 2} {
		mode := "seq"
		if par > 1 {
			mode = "parallel"
		}
		b.Run(mode+"/check-vs-do", func(b *testing.B) { alternateBlocks(b, par, "c", do, check) })
	}
}
