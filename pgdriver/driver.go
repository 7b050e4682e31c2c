package pgdriver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/redfence/redfence/internal/invalid"
	"github.com/redfence/redfence/internal/typednil"
	"github.com/redfence/redfence/mutex/backend"
)

// DB is what the Driver runs its statements on: a *pgxpool.Pool, or
// anything that runs one statement at a time as autocommit (a pool behind
// PgBouncer in transaction mode included). The Driver keeps no session
// state on it.
type DB interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Table is the lease table's name in its schema.
const Table = "redfence_locks"

// ErrInvalid is matched by the errors of bad arguments, before any
// statement is sent; it is mutex.ErrInvalid.
var ErrInvalid = backend.ErrInvalid

// ErrNotHeld is matched by Check's error when the hold it names is not the
// key's live lease: the lease ran out, another holder took the key, or it
// was released. The transaction must roll back.
var ErrNotHeld = errors.New("pgdriver: the hold's lease is not live")

// Driver is a backend.Backend whose locks are rows of one PostgreSQL table,
// timed by the database's clock.
type Driver struct {
	db      DB
	table   string // quoted, schema-qualified when WithSchema named one
	tables  tables
	cfg     config
	sql     statements
	slots   slotStatements
	inspect inspectStatements
	journal journalStatements
	sem     semStatements
	rw      rwStatements
	ddl     []string  // what Migrate creates beside the lease table
	funcs   []string  // the functions it creates, by quoted name
	listen  *listener // nil without WithListener: waiters poll
}

var (
	_ backend.Backend            = (*Driver)(nil)
	_ backend.ConditionalWatcher = (*Driver)(nil)
)

// New returns a Driver over db. A nil db or a bad option returns an error
// matching ErrInvalid; New sends nothing (Migrate creates the table).
func New(db DB, opts ...Option) (*Driver, error) {
	if typednil.Is(db) {
		return nil, invalidf("nil db")
	}
	cfg := config{}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	t := tables{
		slots: qualified(cfg, SlotsTable), records: qualified(cfg, RecordsTable),
		forced: qualified(cfg, ForcedTable), terms: qualified(cfg, TermsTable), heads: qualified(cfg, TermHeadsTable),
		sems: qualified(cfg, SemaphoresTable), permits: qualified(cfg, PermitsTable),
		rwlocks: qualified(cfg, RWLocksTable), rwholds: qualified(cfg, RWHoldsTable),
	}
	d := &Driver{db: db, cfg: cfg, table: qualified(cfg, Table), tables: t}
	d.slots = prepareSlots(t.slots, t.records)
	channel := channelOf(cfg.schema)
	d.sql = prepare(d.table, channel)
	d.inspect = prepareInspect(d.table, t.forced, channel)
	d.journal = prepareJournal(t.terms, t.heads)
	sf := semFuncs{acquire: qualified(cfg, "redfence_sem_acquire"), release: qualified(cfg, "redfence_sem_release"),
		extend: qualified(cfg, "redfence_sem_extend")}
	rf := rwFuncs{reclaim: qualified(cfg, "redfence_rw_reclaim"), acquire: qualified(cfg, "redfence_rw_acquire"),
		release: qualified(cfg, "redfence_rw_release"), extend: qualified(cfg, "redfence_rw_extend"),
		downgrade: qualified(cfg, "redfence_rw_downgrade")}
	d.sem = prepareSemaphores(t.sems, t.permits, sf, channel)
	d.rw = prepareRW(t.rwlocks, t.rwholds, rf)
	d.ddl = slices.Concat(semaphoreTables(t.sems, t.permits, sf, channel), rwTables(t.rwlocks, t.rwholds, rf, channel))
	d.funcs = []string{sf.acquire, sf.release, sf.extend, rf.reclaim, rf.acquire, rf.release, rf.extend, rf.downgrade}
	if cfg.listenURL != "" {
		d.listen = newListener(cfg.listenURL, channel)
	}
	return d, nil
}

// Watch wakes wake each time key may have been released (backend.Watcher),
// from the session WithListener names; Watching says whether there is one.
func (d *Driver) Watch(key string, wake func()) (<-chan struct{}, func()) {
	if d.listen == nil {
		return make(chan struct{}), func() {}
	}
	return d.listen.watch(key, wake)
}

// Watching reports whether the Driver watches releases (WithListener):
// the Locker's waiters poll otherwise.
func (d *Driver) Watching() bool { return d.listen != nil }

// Close ends the listening session, if any. The Locker closes its Driver;
// db stays the caller's.
func (d *Driver) Close() error {
	if d.listen != nil {
		d.listen.close()
	}
	return nil
}

// Option configures a Driver.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	schema    string
	listenURL string
	err       error
}

// WithListener names a session's connection string (pgx's), on which the
// Driver LISTENs for releases, so that a waiter takes a freed key at once:
// one connection per Driver, opened at the first wait. It must reach
// PostgreSQL itself, not PgBouncer in transaction mode, where no session
// outlives a transaction. Default: none, and waiters poll, each at most
// every lease the holder has left; releases are NOTIFYed either way.
func WithListener(connString string) Option {
	return optionFunc(func(c *config) {
		if _, err := pgx.ParseConfig(connString); err != nil {
			if c.err == nil {
				c.err = invalidf("listener connection string: %v", err)
			}
			return
		}
		c.listenURL = connString
	})
}

// WithSchema puts the lease table in schema, which Migrate creates when it
// does not exist. Default: none, the table is found on the connection's
// search_path. A schema may not be empty, longer than 63 bytes, contain a
// NUL or be invalid UTF-8.
func WithSchema(schema string) Option {
	return optionFunc(func(c *config) {
		switch {
		case schema == "", len(schema) > 63, strings.ContainsRune(schema, 0), !utf8.ValidString(schema):
			if c.err == nil {
				c.err = invalidf("schema %q: 1 to 63 bytes of UTF-8, no NUL", schema)
			}
			return
		}
		c.schema = schema
	})
}

// migrateLock is the advisory lock Migrate holds for its transaction, so
// that replicas starting together create the table once: concurrent CREATE
// ... IF NOT EXISTS can still fail on PostgreSQL's catalogs.
const migrateLock = 7310591337469141521

// Migrate creates the schema (WithSchema), the lease table, the runner's
// two tables (SlotsTable, RecordsTable), the audit of forced releases
// (ForcedTable), election's journal (TermsTable, TermHeadsTable), the
// semaphores' (SemaphoresTable, PermitsTable) and the read-write locks'
// (RWLocksTable, RWHoldsTable) tables, and the PL/pgSQL functions over the
// last four, when they do not exist. Several replicas may run it at once:
// each waits for the others' transaction, then finds the tables there. It
// works through PgBouncer in transaction mode (the lock is the
// transaction's). When every table and function is there already it
// creates nothing, so a role without the CREATE privilege, as services
// often run under, may call it at every start.
func (d *Driver) Migrate(ctx context.Context) error {
	if ctx == nil {
		return invalidf("nil context")
	}
	t := d.tables
	all := []string{d.table, t.slots, t.records, t.forced, t.terms, t.heads, t.sems, t.permits, t.rwlocks, t.rwholds}
	var there bool
	if err := d.db.QueryRow(ctx, `SELECT (SELECT bool_and(to_regclass(n) IS NOT NULL) FROM unnest($1::text[]) AS n)
	AND (SELECT bool_and(to_regproc(f) IS NOT NULL) FROM unnest($2::text[]) AS f)`, all, d.funcs).Scan(&there); err != nil {
		return fmt.Errorf("pgdriver: migrate: %w", err)
	}
	if there {
		return nil
	}
	tx, err := d.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgdriver: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	stmts := []string{"SELECT pg_advisory_xact_lock($1)"}
	if d.cfg.schema != "" {
		stmts = append(stmts, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{d.cfg.schema}.Sanitize())
	}
	// owner is NULL while the key is free; the row stays after a release,
	// keeping the key's last token, so that tokens never go back.
	stmts = append(stmts, `CREATE TABLE IF NOT EXISTS `+d.table+` (
	key        text PRIMARY KEY,
	owner      text,
	token      bigint NOT NULL CHECK (token > 0),
	count      bigint NOT NULL DEFAULT 0,
	expires_at timestamptz,
	acquired_at timestamptz, -- when token was issued, for operators
	renewed_at  timestamptz  -- when the lease last began
)`)
	stmts = append(stmts, slotTables(d.tables.slots, d.tables.records)...)
	stmts = append(stmts, forcedTable(d.tables.forced))
	stmts = append(stmts, journalTables(d.tables.terms, d.tables.heads)...)
	stmts = append(stmts, d.ddl...)
	for i, s := range stmts {
		var args []any
		if i == 0 {
			args = []any{int64(migrateLock)}
		}
		if _, err := tx.Exec(ctx, s, args...); err != nil {
			return fmt.Errorf("pgdriver: migrate: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgdriver: migrate: %w", err)
	}
	return nil
}

// channelOf is the NOTIFY channel of the Driver's tables in schema: the
// lease table's name, with the schema's in front when there is one. A
// channel's name is an identifier, 63 bytes at most (pg_notify refuses a
// longer one, and so every release): past that the schema is a hash.
func channelOf(schema string) string {
	switch c := schema + "." + Table; {
	case schema == "":
		return Table
	case len(c) <= 63:
		return c
	}
	sum := sha256.Sum256([]byte(schema))
	return Table + "." + hex.EncodeToString(sum[:12])
}

func invalidf(format string, args ...any) error { return invalid.Errorf("pgdriver", format, args...) }

// tables are the quoted, schema-qualified names of the tables beside the
// lease table.
type tables struct {
	slots, records, forced, terms, heads string
	sems, permits, rwlocks, rwholds      string
}

// qualified is table's quoted name, in cfg's schema when it names one.
func qualified(cfg config, table string) string {
	if cfg.schema != "" {
		return pgx.Identifier{cfg.schema, table}.Sanitize()
	}
	return pgx.Identifier{table}.Sanitize()
}
