package sqlfence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/fenced/internal/fencetel"
	"github.com/redfence/redfence/internal/cause"
)

// Beginner starts a transaction: *sql.DB and *sql.Conn satisfy it. A
// *sql.Conn is one session, so calls through it must not overlap.
type Beginner interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
}

// Guard records the highest token accepted per resource and refuses writes
// with lower ones. It is safe for concurrent use and holds no connection of
// its own; it owns no goroutines, so there is nothing to close.
type Guard struct {
	db      Beginner
	dialect Dialect
	table   string // as configured, for messages
	st      statements
	first   firstSQL      // Check's, before the fence
	storage *storageCheck // MySQL: when the engine was last found InnoDB
	tel     fencetel.Telemetry
	// record is dialect.record; tests swap in a broken one to see the
	// concurrency test catch it (export_test.go).
	record func(ctx context.Context, tx *sql.Tx, resource string, token int64) (int64, error)
}

// New returns a Guard over db, which speaks dialect d. The Guard does not
// open, configure or close db; the package doc says what each dialect
// needs of it. A nil db, a typed nil one (a nil *sql.DB in the interface),
// an unknown dialect or a bad option returns an error matching ErrInvalid,
// without a round trip. Call Migrate before Do (at start-up, from every
// replica at once if need be, or from your migrations); until then Do and
// Check return an error matching ErrNotMigrated.
func New(db Beginner, d Dialect, opts ...Option) (*Guard, error) {
	cfg := config{Table: DefaultTable}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := fence.Required("database", db); err != nil {
		return nil, err
	}
	if d != Postgres && d != MySQL && d != SQLite {
		return nil, invalid("unknown dialect %v", d)
	}
	parts, err := fence.SplitTable(cfg.Table)
	if err != nil {
		return nil, err
	}
	g := &Guard{db: db, dialect: d, table: cfg.Table, storage: &storageCheck{born: time.Now()},
		tel: newTelemetry(cfg.Tracer, cfg.Meter)}
	g.record = func(ctx context.Context, tx *sql.Tx, resource string, token int64) (int64, error) {
		return g.dialect.record(ctx, tx, &g.st, resource, token)
	}
	g.st = d.statements(cfg.Table, parts)
	g.first = d.firstSQL(parts)
	return g, nil
}

// Migrate creates the fence table if it does not exist. It is idempotent,
// and replicas starting together may all run it at once: each returns nil
// and one table is made. On PostgreSQL, two concurrent CREATE TABLE IF NOT
// EXISTS of one name can fail on the catalog, so Migrate first takes
// fenced's transaction-scoped advisory lock (it holds through PgBouncer in
// transaction mode); MySQL and MariaDB serialise them on the table name's
// metadata lock; SQLite on its write lock, waited for up to the DSN's busy
// timeout.
//
// It does not alter an existing table, nor create its schema. It then
// checks that the table can fence: on MySQL, that it is InnoDB's, whose row
// locks and transactions the fence needs; on SQLite, that its database is
// a file, not in memory (":memory:", mode=memory, a shared cache of either,
// or temp), which each connection sees apart. Another table is reported as
// ErrUnsafeStorage, and Migrate commits nothing. PostgreSQL, MySQL and
// MariaDB check the CREATE privilege even when the table exists: a role
// without it gets that error from every call, so run Migrate from your
// migrations, as the owner, instead.
//
// A nil ctx or an unusable Guard returns an error matching ErrInvalid, and a
// ctx already done returns ctx.Err() (wrapped), both without a round trip;
// errors from the database come back wrapped with %w.
func (g *Guard) Migrate(ctx context.Context) error {
	if err := g.usable(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlfence: migrate: %w", err)
	}
	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op once committed
	for _, s := range g.st.migrate {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("sqlfence: migrate: %w", err)
		}
	}
	if g.st.storage != "" {
		if err := g.checkStorage(ctx, tx); err != nil {
			return fmt.Errorf("sqlfence: migrate: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: migrate: %w", err)
	}
	return nil
}

// Do runs fn in one transaction that first records token for resource.
//
// When token is lower than the highest token recorded for resource, Do rolls
// back without calling fn and returns a *StaleTokenError (errors.Is
// ErrStaleToken). An equal token is accepted. Otherwise Do calls fn with the
// transaction and commits when fn returns nil; the token is recorded only if
// the commit succeeds, together with fn's writes. From the fence to the
// commit the transaction holds the resource's fence row (SQLite: the
// database's write lock), so writers of one resource are serialised: once a
// transaction has recorded token t, none with a lower token can commit a
// write behind it. When the fence table does not exist, Do returns an error
// matching ErrNotMigrated; when MySQL's is no longer InnoDB's,
// ErrUnsafeStorage (see the package doc).
//
// Before any round trip, Do returns an error matching ErrInvalid for a nil
// ctx, a nil fn, an unusable Guard (nil, or zero: not from New), a resource
// that is empty, longer than MaxResourceLen bytes, not valid UTF-8 or holds
// a NUL byte, or a negative token: tokens run from 0 to math.MaxInt64. A ctx
// already done returns ctx.Err() (wrapped), also without a round trip.
//
// When fn returns an error, Do rolls back and returns that error as it is.
// When fn panics, Do rolls back and the panic continues. Errors from the
// database (deadlocks, lock wait timeouts, serialization failures, SQLite's
// busy database, a failed commit; the package doc lists the codes) are
// returned wrapped with %w, so errors.As finds the driver's error; the whole
// unit of work can be retried with the same token. When ctx ends while the
// transaction is open, database/sql rolls it back.
//
// fn must do all its writes through tx, and must not commit or roll it back.
func (g *Guard) Do(ctx context.Context, resource string, token int64, fn func(ctx context.Context, tx *sql.Tx) error) error {
	c := Claim{Resource: resource, Token: token}
	if err := g.usable(ctx, c); err != nil {
		return err
	}
	return g.do(ctx, "Do", []Claim{c}, fn)
}

// do is Do and DoAll once their claims are valid and in canonical order:
// op names the caller.
func (g *Guard) do(ctx context.Context, op string, claims []Claim, fn func(ctx context.Context, tx *sql.Tx) error) (err error) {
	if fn == nil {
		return invalid("nil fn")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlfence: %w", cause.Wrap(ctx, err))
	}
	// INTERNAL: the span wraps fn, the caller's code; the statements beneath
	// it are the driver's to trace.
	ctx, span := g.start(ctx, op, claims)
	defer func() { endSpan(span, err) }()

	tx, err := g.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlfence: begin: %w", cause.Wrap(ctx, err))
	}
	done := false
	defer func() {
		if !done { // an error, a stale token, or fn panicked
			_ = tx.Rollback()
		}
	}()
	if err := g.verifyStorage(ctx, tx); err != nil {
		return err
	}
	if err := g.check(ctx, tx, claims, span); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	done = true // Commit ends the transaction even when it fails.
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlfence: commit: %w", cause.Wrap(ctx, err))
	}
	return nil
}

// Check records token for resource inside tx, which the caller began and
// will commit. It must come before the transaction's reads and writes:
// writes made before it are not fenced, and a row read before it may
// predate a write that the resource's previous holder committed while
// Check waited for the fence; writing back what was read would undo that
// write (a lost update). So Check refuses to follow such a read, records
// nothing, and returns an error matching ErrCheckNotFirst:
//
//   - PostgreSQL: any read (SELECT, SELECT … FOR UPDATE) of a table other
//     than the fence table earlier in tx, at every isolation level, stale
//     or not: PostgreSQL cannot tell. Writes, and other fences' Check, are
//     not reads, nor the locks writes take of their own (a foreign key's
//     check, another fence's trigger); a write that reads another table
//     (INSERT … SELECT) is. A SELECT … FOR UPDATE/SHARE of a table that a
//     foreign key links to a table tx wrote is not told from the key's
//     check, and passes.
//   - MySQL: a read whose snapshot a write of the resource committed since
//     has overtaken, at REPEATABLE READ (InnoDB's default); a current read
//     is accepted. Under READ COMMITTED each statement reads afresh and
//     Check cannot tell: call it first. Under SERIALIZABLE reads lock, and
//     the writer meets a deadlock or a lock wait timeout instead.
//   - SQLite: Check adds nothing. A deferred transaction that read cannot
//     take the write lock behind another writer and fails with SQLITE_BUSY
//     or SQLITE_BUSY_SNAPSHOT; an immediate one holds the lock from BEGIN.
//
// Roll tx back after ErrCheckNotFirst and begin again with Check first,
// then read. On a stale token Check returns a *StaleTokenError. After
// either error the caller must roll tx back; any writes committed anyway
// are not protected. A snapshot or lock taken before Check can also turn
// the fence's wait into an error (PostgreSQL under REPEATABLE READ or
// SERIALIZABLE; see the package doc).
//
// Bad arguments and a done ctx are reported as by Do, before any round
// trip; a nil tx is ErrInvalid too.
func (g *Guard) Check(ctx context.Context, tx *sql.Tx, resource string, token int64) error {
	c := Claim{Resource: resource, Token: token}
	if err := g.usable(ctx, c); err != nil {
		return err
	}
	if tx == nil {
		return invalid("nil transaction")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlfence: %w", cause.Wrap(ctx, err))
	}
	return g.checkIn(ctx, "Check", tx, []Claim{c})
}

// checkIn is Check and CheckAll once their claims are valid and in
// canonical order: op names the caller.
func (g *Guard) checkIn(ctx context.Context, op string, tx *sql.Tx, claims []Claim) (err error) {
	ctx, span := g.start(ctx, op, claims)
	defer func() { endSpan(span, err) }()
	if err := g.verifyStorage(ctx, tx); err != nil {
		return err
	}
	if err := g.readFirst(ctx, tx, claims); err != nil {
		return err
	}
	return g.check(ctx, tx, claims, span)
}

// usable returns the ErrInvalid a method reports before any round trip
// for a Guard it cannot use, a nil ctx or a claim outside the limits
// (fence.Usable).
func (g *Guard) usable(ctx context.Context, claims ...Claim) error {
	return fence.Usable(ctx, "Guard", g == nil, g != nil && g.db != nil, claims...)
}

// check records each claim's token in tx, in claims' order, and counts
// the outcomes; the first stale token stops it with a *StaleTokenError.
func (g *Guard) check(ctx context.Context, tx *sql.Tx, claims []Claim, span trace.Span) error {
	var highest int64
	for _, c := range claims {
		var err error
		highest, err = g.record(ctx, tx, c.Resource, c.Token)
		switch {
		case err == nil:
		case g.dialect.notMigrated(err): // the fence's statements name no other table
			return fmt.Errorf("%w: %s: %w", ErrNotMigrated, fence.Clip(g.table), err)
		default:
			return fmt.Errorf("sqlfence: check %q: %w", fence.Clip(c.Resource), cause.Wrap(ctx, err))
		}
		if c.Token < highest {
			g.tel.Checks.Add(ctx, 1, metric.WithAttributes(attrOutcome.String("stale")))
			span.SetAttributes(attrOutcome.String("stale"), attrResource.String(c.Resource), attrHighest.Int64(highest))
			return &StaleTokenError{Resource: c.Resource, Token: c.Token, Highest: highest}
		}
		g.tel.Checks.Add(ctx, 1, metric.WithAttributes(attrOutcome.String("accepted")))
	}
	span.SetAttributes(attrOutcome.String("accepted"))
	if len(claims) == 1 { // of several, no one highest token
		span.SetAttributes(attrHighest.Int64(highest))
	}
	return nil
}

// Attribute keys on spans and metrics: fenced's.
const (
	attrResource = attribute.Key("redfence.resource")
	attrToken    = attribute.Key("redfence.token")
	attrHighest  = attribute.Key("redfence.highest")
	attrOutcome  = attribute.Key("redfence.outcome")
	// DoAll's and CheckAll's, in canonical order.
	attrResources = attribute.Key("redfence.resources")
	attrTokens    = attribute.Key("redfence.tokens")
)

// start begins the span of op, named redfence.fenced.<op>: with the
// resource and token of Do's or Check's one claim, the lists of all for
// DoAll and CheckAll.
func (g *Guard) start(ctx context.Context, op string, claims []Claim) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attrResource.String(claims[0].Resource), attrToken.Int64(claims[0].Token)}
	if op == "DoAll" || op == "CheckAll" {
		resources := make([]string, len(claims))
		tokens := make([]int64, len(claims))
		for i, c := range claims {
			resources[i], tokens[i] = c.Resource, c.Token
		}
		attrs = []attribute.KeyValue{attrResources.StringSlice(resources), attrTokens.Int64Slice(tokens)}
	}
	return g.tel.Tracer.Start(ctx, "redfence.fenced."+op, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
}

func endSpan(span trace.Span, err error) {
	if err != nil && !errors.Is(err, ErrStaleToken) {
		span.SetAttributes(attrOutcome.String("error"))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
