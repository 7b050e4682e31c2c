package bench

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// bulkRows is the size of BenchmarkProtectBulkPaired's tables.
const bulkRows = 100_000

// BenchmarkProtectBulkPaired is one UPDATE of every row of a 100,000-row
// table under Guard.Protect's triggers against the same UPDATE of an
// unprotected copy, the two sides alternating (which goes first
// alternating too) inside one benchmark. Each side's transaction first
// declares, untimed, the resources its rows belong to: one for every row
// (declared-1), or 1,000 with 100 rows each (declared-1000). Only the
// UPDATE is timed; it is rolled back and the table vacuumed, untimed, so
// that every cycle starts from the same table. ns/op is one protected
// UPDATE, ref-ns/op one unprotected.
func BenchmarkProtectBulkPaired(b *testing.B) {
	pool := testutil.Postgres(b)
	ctx := context.Background()
	g, err := fenced.New(pool, fenced.WithTable("bench_bulk_fences"))
	if err != nil {
		b.Fatal(err)
	}
	if err := g.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		declared int
		expr     string
	}{{1, `'r:' || one`}, {1000, `'r:' || many`}} {
		plain, protected := bulkTable(ctx, b, pool, "plain"), bulkTable(ctx, b, pool, "protected_"+strconv.Itoa(c.declared))
		if err := g.Protect(ctx, protected, c.expr); err != nil {
			b.Fatal(err)
		}
		resources := make([]string, c.declared)
		for i := range resources {
			resources[i] = "r:" + strconv.Itoa(i)
		}
		update := func(table string) time.Duration {
			d, err := bulkUpdate(ctx, pool, g, table, resources)
			if err != nil {
				b.Fatal(err)
			}
			return d
		}
		b.Run(fmt.Sprintf("declared-%d/protected-vs-plain", c.declared), func(b *testing.B) {
			update(plain) // warm up: a session plans the trigger's statements once
			update(protected)
			var subT, refT time.Duration
			n := 0
			for ; b.Loop(); n++ {
				if n%2 == 0 {
					refT += update(plain)
					subT += update(protected)
				} else {
					subT += update(protected)
					refT += update(plain)
				}
			}
			b.ReportMetric(float64(subT.Nanoseconds())/float64(n), "ns/op")
			b.ReportMetric(float64(refT.Nanoseconds())/float64(n), "ref-ns/op")
			b.ReportMetric(float64(subT)/float64(refT), "x-ref")
		})
	}
}

// bulkTable makes (once) a table of bulkRows rows: one is 0 in every row,
// many is one of 1,000 values, 100 rows each. Autovacuum is off: the
// benchmark vacuums between cycles, where it does not count.
func bulkTable(ctx context.Context, b *testing.B, pool *pgxpool.Pool, name string) string {
	table := "bench_bulk_" + name
	_, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+table+` (id int PRIMARY KEY, one int NOT NULL, many int NOT NULL, v int NOT NULL)
		WITH (autovacuum_enabled = false);
		INSERT INTO `+table+` SELECT i, 0, i % 1000, 0 FROM generate_series(1, `+strconv.Itoa(bulkRows)+`) i ON CONFLICT DO NOTHING`)
	if err == nil {
		_, err = pool.Exec(ctx, `VACUUM ANALYZE `+table)
	}
	if err != nil {
		b.Fatal(err)
	}
	return table
}

// bulkUpdate declares resources in a transaction, times an UPDATE of every
// row of table, rolls back and vacuums.
func bulkUpdate(ctx context.Context, pool *pgxpool.Pool, g *fenced.Guard, table string, resources []string) (time.Duration, error) {
	var d time.Duration
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, r := range resources {
			if err := g.Check(ctx, tx, r, 1); err != nil {
				return err
			}
		}
		start := time.Now()
		tag, err := tx.Exec(ctx, `UPDATE `+table+` SET v = v + 1`)
		d = time.Since(start)
		if err == nil && tag.RowsAffected() != bulkRows {
			err = fmt.Errorf("%s: updated %d rows", table, tag.RowsAffected())
		}
		if err == nil {
			err = errRollback
		}
		return err
	})
	if err != errRollback {
		return 0, err
	}
	_, err = pool.Exec(ctx, `VACUUM `+table)
	return d, err
}

// errRollback ends bulkUpdate's transaction without committing.
var errRollback = fmt.Errorf("roll back")
