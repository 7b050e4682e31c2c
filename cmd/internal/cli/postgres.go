package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

// Postgres is the Store of --postgres URL: the lease table of pgdriver
// Drivers, in --postgres-schema. The flag alone names it: DATABASE_URL is
// left to the applications, whose environment an operator's shell often
// shares.
func Postgres() Store { return &pgStore{} }

type pgStore struct {
	url    string
	schema string
	cfg    *pgxpool.Config // Resolve's
}

func (s *pgStore) Flags(fs *flag.FlagSet) {
	// Func, not StringVar: a command's flag set declares these again, and
	// StringVar would reset what the head of the command line set.
	fs.Func("postgres", "PostgreSQL `URL` whose pgdriver lease table to look at (postgres://user@host:port/db)", func(v string) error {
		s.url = v
		return nil
	})
	fs.Func("postgres-schema", "the pgdriver.WithSchema `name` of the Lockers to look at (default: the search_path)", func(v string) error {
		s.schema = v
		return nil
	})
}

func (s *pgStore) Named(func(string) string) (byFlag, byEnv bool) {
	return s.url != "" || s.schema != "", false
}

func (s *pgStore) Resolve(func(string) string) error {
	if s.url == "" {
		return usagef("", "--postgres-schema without --postgres: give the database's URL")
	}
	cfg, err := pgxpool.ParseConfig(s.url)
	if err != nil {
		return usagef("", "--postgres: not a PostgreSQL URL or connection string")
	}
	cfg.MaxConns = 2
	s.cfg = cfg
	return nil
}

func (s *pgStore) Usage() string {
	return `PostgreSQL (--postgres, pgdriver's lease table):
  postgres://[user[:pass]@]host:port/db   the database; --postgres-schema NAME its schema
`
}

// Dial builds a Locker over a pgdriver Driver on a pool of the URL,
// which connects at its first call. pgdriver keeps no key prefix: a
// prefix other than the default is a usage error.
func (s *pgStore) Dial(prefix string, opts ...mutex.Option) (Conn, error) {
	if prefix != "" && prefix != defaultPrefix {
		return nil, usagef("", "--prefix: pgdriver keeps no key prefix; give --postgres-schema instead")
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), s.cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.where(), err)
	}
	var dopts []pgdriver.Option
	if s.schema != "" {
		dopts = append(dopts, pgdriver.WithSchema(s.schema))
	}
	d, err := pgdriver.New(pool, dopts...)
	var l *mutex.Locker
	if err == nil {
		if l, err = mutex.New(d, opts...); err != nil {
			_ = d.Close()
		}
	}
	if err != nil {
		pool.Close()
		if errors.Is(err, mutex.ErrInvalid) {
			return nil, usagef("", "%s", trimInvalid(err.Error()))
		}
		return nil, err
	}
	return &pgConn{store: s, pool: pool, locker: l}, nil
}

func (s *pgStore) where() string {
	return "PostgreSQL at " + net.JoinHostPort(s.cfg.ConnConfig.Host, strconv.Itoa(int(s.cfg.ConnConfig.Port)))
}

// pgConn is a command's Locker and the pool under it.
type pgConn struct {
	store  *pgStore
	pool   *pgxpool.Pool
	locker *mutex.Locker // owns the Driver
}

func (c *pgConn) Locker() *mutex.Locker { return c.locker }
func (c *pgConn) Where() string         { return c.store.where() }

func (c *pgConn) Traits() Traits {
	return Traits{Store: "PostgreSQL", Nodes: 1, NoQueue: "PostgreSQL keeps no queue (each Locker queues its own waiters)"}
}

// Probe refuses a standby, whose lease table lags the primary's (a lock
// shown free there may be held), and a database without the table.
func (c *pgConn) Probe(ctx context.Context, timeout time.Duration, _ func(string)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	table := pgx.Identifier{pgdriver.Table}
	if c.store.schema != "" {
		table = pgx.Identifier{c.store.schema, pgdriver.Table}
	}
	var standby, found bool
	err := c.pool.QueryRow(ctx, `SELECT pg_is_in_recovery(), to_regclass($1) IS NOT NULL`, table.Sanitize()).Scan(&standby, &found)
	switch {
	case err != nil:
		return c.Explain(err, timeout)
	case standby:
		return fmt.Errorf("%s is a standby: its lease table lags the primary's; give the primary", c.Where())
	case !found:
		return fmt.Errorf("%s has no table %s: no pgdriver Locker has run Migrate there (check --postgres-schema)", c.Where(), table.Sanitize())
	}
	return nil
}

func (c *pgConn) Explain(err error, elapsed time.Duration) error {
	if IsTimeout(err) {
		return fmt.Errorf("%s did not answer: gave up after %v", c.Where(), elapsed.Round(10*time.Millisecond))
	}
	return fmt.Errorf("%s: %s", c.Where(), Plain(err, elapsed))
}

// Close closes the Locker, then the pool under it.
func (c *pgConn) Close() {
	_ = c.locker.Close()
	c.pool.Close()
}
