package bench

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"

	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/testutil"
)

// BenchmarkSQLFencePaired: a transaction with one INSERT through
// sqlfence.Guard.Do against the same transaction without the fence, in
// alternating blocks inside one benchmark, per dialect: what the fence adds
// to a write. Named <dialect>/<mode>/fenced-vs-plain, which bench/report
// prints as SQLFencePaired/<dialect>/<mode>/fenced × plain. The drivers'
// defaults: pgx's stdlib (prepared statements cached per connection),
// go-sql-driver/mysql (a statement with arguments is prepared, run and
// closed), modernc.org/sqlite on a WAL file with a busy timeout.
func BenchmarkSQLFencePaired(b *testing.B) {
	ctx := context.Background()
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
			insert := d.insert
			ref := func(res string) error {
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, insert, res, 1); err != nil {
					_ = tx.Rollback()
					return err
				}
				return tx.Commit()
			}
			sub := func(res string) error {
				return g.Do(ctx, res, 1, func(ctx context.Context, tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, insert, res, 1)
					return err
				})
			}
			for _, par := range []int{1, 2} {
				mode := "seq"
				if par > 1 {
					mode = "parallel"
				}
				b.Run(mode+"/fenced-vs-plain", func(b *testing.B) { alternateBlocks(b, par, "p", ref, sub) })
			}
		})
	}
}

// sqlDialects are the databases the sqlfence benchmarks write to, and
// how: a table of rows and an INSERT of one (resource, token).
var sqlDialects = []struct {
	name    string
	dialect sqlfence.Dialect
	driver  string
	dsn     func(testing.TB) string
	create  string
	insert  string
}{
	{"postgres", sqlfence.Postgres, "pgx", testutil.PostgresURL,
		`CREATE TABLE IF NOT EXISTS bench_sql_rows (id bigserial PRIMARY KEY, resource text NOT NULL, token bigint NOT NULL)`,
		`INSERT INTO bench_sql_rows (resource, token) VALUES ($1, $2)`},
	{"mysql", sqlfence.MySQL, "mysql", testutil.MySQLDSN,
		`CREATE TABLE IF NOT EXISTS bench_sql_rows (id BIGINT AUTO_INCREMENT PRIMARY KEY, resource VARCHAR(64) NOT NULL, token BIGINT NOT NULL) ENGINE=InnoDB`,
		`INSERT INTO bench_sql_rows (resource, token) VALUES (?, ?)`},
	{"sqlite", sqlfence.SQLite, "sqlite", func(tb testing.TB) string { return testutil.SQLiteDSN(tb) },
		`CREATE TABLE IF NOT EXISTS bench_sql_rows (id INTEGER PRIMARY KEY AUTOINCREMENT, resource TEXT NOT NULL, token INTEGER NOT NULL)`,
		`INSERT INTO bench_sql_rows (resource, token) VALUES (?, ?)`},
}
