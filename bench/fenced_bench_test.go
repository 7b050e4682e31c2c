package bench

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// BenchmarkFenced is a transaction with one INSERT, plain and through
// fenced.Guard.Do (one more statement, the fence upsert, in the same
// transaction), sequential and parallel, in the same run. Resources are
// spread so parallel writers do not queue on one fence row.
func BenchmarkFenced(b *testing.B) {
	pool := testutil.Postgres(b)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_rows (id bigserial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	g := fenced.New(pool)
	if err := g.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	const insert = `INSERT INTO bench_rows (resource, token) VALUES ($1, $2)`
	resources := []string{"r0", "r1", "r2", "r3", "r4", "r5", "r6", "r7"}

	plain := func(res string, tok int64) {
		err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, insert, res, tok)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	guarded := func(res string, tok int64) {
		err := g.Do(ctx, res, tok, func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, insert, res, tok)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	var tok int64 = 1
	b.Run("seq/plain", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			plain(resources[i%len(resources)], tok)
		}
	})
	b.Run("seq/fenced", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			guarded(resources[i%len(resources)], tok)
		}
	})
	b.Run("parallel/plain", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			res := resources[nextWorker()%len(resources)]
			for pb.Next() {
				plain(res, tok)
			}
		})
	})
	b.Run("parallel/fenced", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			res := resources[nextWorker()%len(resources)]
			for pb.Next() {
				guarded(res, tok)
			}
		})
	})
}

var workers atomic.Int64

// nextWorker numbers RunParallel goroutines so each gets its own resource.
func nextWorker() int { return int(workers.Add(1)) }
