package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strconv"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/lockview"
)

func setupFences(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print JSON (redfence help json has its schema)")
	limit := fs.Int("limit", 100, "at most `N` rows, 1 to "+strconv.Itoa(fenced.MaxFences))
	table := fs.String("table", fenced.DefaultTable, "fence table `T`")
	return func(ctx context.Context, inv *invocation, args []string) error {
		prefix := ""
		if len(args) == 1 {
			prefix = args[0]
		}
		if *limit < 1 || *limit > fenced.MaxFences {
			return usagef("fences", "--limit must be 1 to %d, got %d", fenced.MaxFences, *limit)
		}
		db, err := openFenceDB(ctx, inv.env, *table, "fences reads the fence table of a PostgreSQL database")
		if err != nil {
			return err
		}
		defer db.close()
		var fences []fenced.Fence
		elapsed, err := timed(ctx, inv.g.timeout, func(ctx context.Context) (err error) {
			fences, err = db.guard.Fences(ctx, prefix, *limit)
			return err
		})
		if err != nil {
			return db.explain(err, elapsed)
		}
		if *asJSON {
			return writeJSON(inv.stdout, toFencesJSON(fences))
		}
		return writeFences(inv.stdout, fences, prefix, *table)
	}
}

func writeFences(w io.Writer, fences []fenced.Fence, prefix, table string) error {
	if len(fences) == 0 {
		msg := "no fences in " + table
		if prefix != "" {
			msg += fmt.Sprintf(" whose resource starts with %q", prefix)
		}
		_, err := fmt.Fprintln(w, msg)
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "RESOURCE\tTOKEN\tUPDATED")
	for _, f := range fences {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", lockview.Visible(f.Resource), f.Token, stamp(f.UpdatedAt))
	}
	return tw.Flush()
}

// fenceDB is the PostgreSQL database of DATABASE_URL and a Guard over its
// fence table.
type fenceDB struct {
	pool  *pgxpool.Pool
	guard *fenced.Guard
	table string
	where string // "PostgreSQL at host:port"
}

// openFenceDB opens DATABASE_URL's database, lazily: a bad address shows
// at the first call. why says what needs it, for when it is not set.
func openFenceDB(ctx context.Context, env func(string) string, table, why string) (*fenceDB, error) {
	u := env("DATABASE_URL")
	if u == "" {
		return nil, fmt.Errorf("DATABASE_URL is not set: %s", why)
	}
	cfg, err := pgxpool.ParseConfig(u)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err) // pgx hides the password
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("DATABASE_URL: %w", err)
	}
	guard, err := fenced.New(pool, fenced.WithTable(table))
	if err != nil { // a bad --table: nothing was sent
		pool.Close()
		return nil, usagef("", "%s", trimInvalid(err.Error()))
	}
	where := "PostgreSQL at " + net.JoinHostPort(cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)))
	return &fenceDB{pool: pool, guard: guard, table: table, where: where}, nil
}

func (db *fenceDB) close() { db.pool.Close() }

// explain words an error of the Guard, after elapsed, for an operator.
func (db *fenceDB) explain(err error, elapsed time.Duration) error {
	switch {
	case errors.Is(err, fenced.ErrInvalid):
		return usagef("", "%s", trimInvalid(err.Error()))
	case errors.Is(err, fenced.ErrNotMigrated):
		return fmt.Errorf("the fence table %s does not exist in the database of DATABASE_URL (%s): fenced.Guard.Migrate creates it", db.table, db.where)
	case errors.Is(err, context.Canceled):
		return errors.New("interrupted")
	case IsTimeout(err):
		return fmt.Errorf("%s did not answer: gave up after %v", db.where, elapsed.Round(10*time.Millisecond))
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("cannot reach %s: connection refused", db.where)
	}
	return fmt.Errorf("%s: %v", db.where, err)
}
