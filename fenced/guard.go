package fenced

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/fenced/internal/fencetel"
	"github.com/redfence/redfence/internal/cause"
	"github.com/redfence/redfence/internal/pgfence"
	"github.com/redfence/redfence/internal/pgfirst"
	"github.com/redfence/redfence/internal/typednil"
)

// Beginner starts a transaction. *pgxpool.Pool, *pgx.Conn and pgx.Tx (which
// starts a savepoint) all satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Guard records the highest token accepted per resource and refuses writes
// with lower ones. It is safe for concurrent use and holds no connection of
// its own; it owns no goroutines, so there is nothing to close.
type Guard struct {
	db      Beginner
	table   string // the fence table as configured, quoted
	upsert  string
	highest string
	nested  bool // db is a pgx.Tx: Do's transaction is a savepoint in another
	tel     fencetel.Telemetry
}

// New returns a Guard over db. A nil db, a typed nil one (a nil
// *pgxpool.Pool or *pgx.Conn in the interface) or a bad option returns an
// error matching ErrInvalid, without a round trip. Call Migrate before Do
// (at start-up, from every replica at once if need be, or from your
// migrations); until then the other methods return an error matching
// ErrNotMigrated.
func New(db Beginner, opts ...Option) (*Guard, error) {
	cfg := config{Table: DefaultTable}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := fence.Required("database", db); err != nil {
		return nil, err
	}
	table, err := quoteTable(cfg.Table)
	if err != nil {
		return nil, err
	}
	g := &Guard{db: db, table: table, tel: newTelemetry(cfg.Tracer, cfg.Meter)}
	_, g.nested = db.(pgx.Tx)
	g.upsert = pgfence.Upsert(g.table)
	g.highest = pgfence.Highest(g.table)
	return g, nil
}

// Migrate creates the fence table if it does not exist. It is idempotent,
// and replicas starting together may all run it at once: each returns nil
// and one table is made. Two concurrent CREATE TABLE IF NOT EXISTS of one
// name can both miss the table and one then fail on the catalog (23505 on
// pg_type's unique index), so Migrate first takes a transaction-scoped
// advisory lock, one per database, and the calls take turns; being
// transaction-scoped, it holds through PgBouncer in transaction mode.
//
// It does not alter an existing table, nor create its schema. PostgreSQL
// checks the CREATE privilege on the schema even when the table exists: a
// role without it gets that error from every call, so run Migrate from
// your migrations, as the owner, instead. A nil ctx or an unusable Guard
// returns an error matching ErrInvalid, and a ctx already done returns
// ctx.Err() (wrapped), both without a round trip; errors from PostgreSQL
// come back wrapped with %w.
func (g *Guard) Migrate(ctx context.Context) error {
	if err := g.usable(ctx); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fenced: migrate: %w", err)
	}
	err := pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, pgfence.MigrateLock); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, pgfence.Create(g.table))
		return err
	})
	if err != nil {
		return fmt.Errorf("fenced: migrate: %w", err)
	}
	return nil
}

// Do runs fn in one transaction that first records token for resource.
//
// When token is lower than the highest token recorded for resource, Do rolls
// back without calling fn and returns a *StaleTokenError (errors.Is
// ErrStaleToken). An equal token is accepted. Otherwise Do calls fn with the
// transaction and commits when fn returns nil; the token is recorded only if
// the commit succeeds, together with fn's writes. When the fence table does
// not exist, Do returns an error matching ErrNotMigrated.
//
// Before any round trip, Do returns an error matching ErrInvalid for a nil
// ctx, a nil fn, an unusable Guard (nil, or zero: not from New), a resource
// that is empty, longer than MaxResourceLen bytes, not valid UTF-8 or holds
// a NUL byte (PostgreSQL text cannot store those), or a negative token:
// tokens run from 0 to math.MaxInt64. A ctx already done returns ctx.Err()
// (wrapped), also without a round trip.
//
// When fn returns an error, Do rolls back and returns that error as it is,
// except a protected table's refusal (see Protect), which comes back as
// Refusal maps it, still wrapping fn's error.
// When fn panics, Do rolls back and the panic continues. Errors from
// PostgreSQL (serialization failures, deadlocks, a failed commit) are
// returned wrapped with %w, so errors.As finds the *pgconn.PgError; the whole
// unit of work can be retried with the same token. Roll-backs run on a short
// context of their own, so a cancelled ctx still ends the transaction
// cleanly.
//
// Over a pgx.Tx, Do's transaction is a savepoint in the caller's; when
// that transaction read a table before Do, Do returns an error matching
// ErrCheckNotFirst without calling fn (see Check).
//
// fn must do all its writes through tx, and must not commit or roll it back.
func (g *Guard) Do(ctx context.Context, resource string, token int64, fn func(ctx context.Context, tx pgx.Tx) error) error {
	c := Claim{Resource: resource, Token: token}
	if err := g.usable(ctx, c); err != nil {
		return err
	}
	return g.do(ctx, "Do", []Claim{c}, fn)
}

// do is Do and DoAll once their claims are valid and in canonical order:
// op names the caller.
func (g *Guard) do(ctx context.Context, op string, claims []Claim, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	if fn == nil {
		return invalid("nil fn")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fenced: %w", cause.Wrap(ctx, err))
	}
	// INTERNAL: the span wraps fn, the caller's code; the round trips to
	// PostgreSQL beneath it are pgx's to trace.
	ctx, span := g.start(ctx, op, claims)
	defer func() { endSpan(span, err) }()

	tx, err := g.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fenced: begin: %w", cause.Wrap(ctx, err))
	}
	done := false
	defer func() {
		if !done { // an error, a stale token, or fn panicked
			rollback(ctx, tx)
		}
	}()
	if g.nested { // the enclosing transaction may have read
		if err := g.readFirst(ctx, tx, op, claims); err != nil {
			return err
		}
	}
	if err := g.check(ctx, tx, claims, span); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		if r := Refusal(err); r != nil {
			return r
		}
		return err
	}
	done = true // Commit ends the transaction even when it fails.
	if err := tx.Commit(ctx); err != nil {
		if r := Refusal(err); r != nil { // a deferred constraint trigger of the user's own
			return r
		}
		return fmt.Errorf("fenced: commit: %w", cause.Wrap(ctx, err))
	}
	return nil
}

// Check records token for resource inside tx, which the caller began and
// will commit. It must come before the transaction's reads and writes:
// writes made before it are not fenced, and a row read before it may
// predate a write that the resource's previous holder committed while
// Check waited for the fence row; writing back what was read would undo
// that write (a lost update), at every isolation level. So Check refuses
// to follow a read: when tx holds a read lock on any table other than the
// fence table (a SELECT, or SELECT … FOR UPDATE, of any row, in tx or in a
// transaction tx is a savepoint of), it records nothing and returns an
// error matching ErrCheckNotFirst; roll tx back and begin again with Check
// first. Writes before it, and other fences' Check or Do, are not reads,
// nor are the locks writes take of their own: a foreign key's check of
// the table at its other end, and another fence's trigger reading its
// fence table. A write that reads another table (INSERT … SELECT,
// UPDATE … FROM) is a read of it. What PostgreSQL's locks cannot tell
// apart, Check lets through: a SELECT … FOR UPDATE/SHARE of a table that a
// foreign key links to a table tx wrote (a plain SELECT of it is refused).
// Check first, then read: the reads see every write committed before the
// fence was passed.
//
// On a stale token it returns a *StaleTokenError. After either error the
// caller must roll tx back; any writes committed anyway are not protected.
// Under REPEATABLE READ or SERIALIZABLE the snapshot is taken at the first
// statement, so a writer that committed while Check waited ends the wait
// with a serialization failure (SQLSTATE 40001), as in Do.
//
// Bad arguments and a done ctx are reported as by Do, before any round
// trip; a nil tx (typed nil included) is ErrInvalid too.
func (g *Guard) Check(ctx context.Context, tx pgx.Tx, resource string, token int64) error {
	c := Claim{Resource: resource, Token: token}
	if err := g.usable(ctx, c); err != nil {
		return err
	}
	if typednil.Is(tx) {
		return invalid("nil transaction")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fenced: %w", cause.Wrap(ctx, err))
	}
	return g.checkIn(ctx, "Check", tx, []Claim{c})
}

// checkIn is Check and CheckAll once their claims are valid and in
// canonical order: op names the caller.
func (g *Guard) checkIn(ctx context.Context, op string, tx pgx.Tx, claims []Claim) (err error) {
	ctx, span := g.start(ctx, op, claims)
	defer func() { endSpan(span, err) }()
	if err := g.readFirst(ctx, tx, "check", claims); err != nil {
		return err
	}
	return g.check(ctx, tx, claims, span)
}

// readFirst returns an error matching ErrCheckNotFirst when tx read a
// table other than the fence table before the fence (see pgfirst); op
// names the caller in errors.
func (g *Guard) readFirst(ctx context.Context, tx pgx.Tx, op string, claims []Claim) error {
	var read bool
	if err := tx.QueryRow(ctx, pgfirst.ReadBefore, g.table).Scan(&read); err != nil {
		return fmt.Errorf("fenced: %s %s: %w", op, fence.Names(claims), err)
	}
	if read {
		return fmt.Errorf("%w: %s %s: the transaction read a table before it", ErrCheckNotFirst, op, fence.Names(claims))
	}
	return nil
}

// usable returns the ErrInvalid a method reports before any round trip
// for a Guard it cannot use, a nil ctx or a claim outside the limits
// (fence.Usable).
func (g *Guard) usable(ctx context.Context, claims ...Claim) error {
	return fence.Usable(ctx, "Guard", g == nil, g != nil && g.db != nil, claims...)
}

// check records each claim's token in tx, in claims' order, and counts
// the outcomes; the first stale token stops it with a *StaleTokenError.
func (g *Guard) check(ctx context.Context, tx pgx.Tx, claims []Claim, span trace.Span) error {
	var highest int64
	for _, c := range claims {
		var err error
		if highest, err = g.record(ctx, tx, "check", c.Resource, c.Token); err != nil {
			return err
		}
		outcome := outcomeOf(c.Token, highest)
		g.tel.Checks.Add(ctx, 1, metric.WithAttributes(attrOutcome.String(outcome)))
		if outcome == "stale" {
			span.SetAttributes(attrOutcome.String(outcome), attrResource.String(c.Resource), attrHighest.Int64(highest))
			return &StaleTokenError{Resource: c.Resource, Token: c.Token, Highest: highest}
		}
	}
	span.SetAttributes(attrOutcome.String("accepted"))
	if len(claims) == 1 { // of several, no one highest token
		span.SetAttributes(attrHighest.Int64(highest))
	}
	return nil
}

// record runs the fence upsert and returns the highest token recorded for
// resource, token itself when it was recorded; op names the caller in
// errors. The upsert locks the resource's row (also when its WHERE is
// false), so the SELECT that follows on the stale path reads the row as it
// stands under our lock.
func (g *Guard) record(ctx context.Context, tx pgx.Tx, op, resource string, token int64) (int64, error) {
	var highest int64
	var declared string
	err := tx.QueryRow(ctx, g.upsert, resource, token).Scan(&highest, &declared)
	switch {
	case err == nil:
	case errors.Is(err, pgx.ErrNoRows): // a higher token is recorded
		if err := tx.QueryRow(ctx, g.highest, resource).Scan(&highest); err != nil {
			return 0, fmt.Errorf("fenced: %s %q: read highest token: %w", op, clip(resource), cause.Wrap(ctx, err))
		}
	case undefinedTable(err): // the upsert names no other table
		return 0, fmt.Errorf("%w: %s: %w", ErrNotMigrated, g.table, err)
	default:
		return 0, fmt.Errorf("fenced: %s %q: %w", op, clip(resource), cause.Wrap(ctx, err))
	}
	return highest, nil
}

// outcomeOf names a recorded token's outcome: accepted, or stale when a
// higher one was recorded before.
func outcomeOf(token, highest int64) string {
	if token < highest {
		return "stale"
	}
	return "accepted"
}

// undefinedTable reports whether err is PostgreSQL's undefined_table
// (42P01).
func undefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == pgfence.UndefinedTable
}

// rollbackTimeout bounds a roll-back: long enough for a healthy server,
// short enough that a dead one does not hold the caller. pgx closes the
// connection when a roll-back fails, which ends the transaction too.
const rollbackTimeout = 5 * time.Second

func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// Attribute keys on spans and metrics.
const (
	attrResource = attribute.Key("redfence.resource")
	attrToken    = attribute.Key("redfence.token")
	attrHighest  = attribute.Key("redfence.highest")
	attrOutcome  = attribute.Key("redfence.outcome")
	// DoAll's and CheckAll's, in canonical order.
	attrResources = attribute.Key("redfence.resources")
	attrTokens    = attribute.Key("redfence.tokens")
)

func claimAttrs(claims []Claim) []attribute.KeyValue {
	resources := make([]string, len(claims))
	tokens := make([]int64, len(claims))
	for i, c := range claims {
		resources[i], tokens[i] = c.Resource, c.Token
	}
	return []attribute.KeyValue{attrResources.StringSlice(resources), attrTokens.Int64Slice(tokens)}
}

// start begins the span of op, named redfence.fenced.<op>: with the
// resource and token of Do's or Check's one claim, the lists of all for
// DoAll and CheckAll.
func (g *Guard) start(ctx context.Context, op string, claims []Claim) (context.Context, trace.Span) {
	attrs := []attribute.KeyValue{attrResource.String(claims[0].Resource), attrToken.Int64(claims[0].Token)}
	if op == "DoAll" || op == "CheckAll" {
		attrs = claimAttrs(claims)
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
