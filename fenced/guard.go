package fenced

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
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
	err     error // configuration error, returned by every method
	table   string
	upsert  string
	highest string
	tel     telemetry
}

// New returns a Guard over db. A nil db or a bad option does not panic: the
// Guard's methods return an error matching ErrInvalid without a round trip.
// Call Migrate once (at start-up or from your migrations) before Do.
func New(db Beginner, opts ...Option) *Guard {
	cfg := config{table: DefaultTable}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	g := &Guard{db: db, tel: newTelemetry(cfg.tracer, cfg.meter)}
	if db == nil {
		g.err = invalid("nil database")
		return g
	}
	g.table, g.err = quoteTable(cfg.table)
	g.upsert = `INSERT INTO ` + g.table + ` AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = now()
WHERE f.token <= EXCLUDED.token
RETURNING token`
	g.highest = `SELECT token FROM ` + g.table + ` WHERE resource = $1`
	return g
}

// Migrate creates the fence table if it does not exist. It is idempotent and
// safe to run from several processes at once (a transaction-scoped advisory
// lock serialises them). It does not alter an existing table.
func (g *Guard) Migrate(ctx context.Context) error {
	if g.err != nil {
		return g.err
	}
	return pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('redfence.fenced.migrate'))`); err != nil {
			return fmt.Errorf("fenced: migrate: %w", err)
		}
		_, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+g.table+` (
	resource   text        PRIMARY KEY,
	token      bigint      NOT NULL CHECK (token >= 0),
	updated_at timestamptz NOT NULL DEFAULT now()
)`)
		if err != nil {
			return fmt.Errorf("fenced: migrate: %w", err)
		}
		return nil
	})
}

// Do runs fn in one transaction that first records token for resource.
//
// When token is lower than the highest token recorded for resource, Do rolls
// back without calling fn and returns a *StaleTokenError (errors.Is
// ErrStaleToken). An equal token is accepted. Otherwise Do calls fn with the
// transaction and commits when fn returns nil; the token is recorded only if
// the commit succeeds, together with fn's writes.
//
// When fn returns an error, Do rolls back and returns that error as it is.
// When fn panics, Do rolls back and the panic continues. Errors from
// PostgreSQL (serialization failures, deadlocks, a failed commit) are
// returned wrapped with %w, so errors.As finds the *pgconn.PgError; the whole
// unit of work can be retried with the same token. Roll-backs run on a short
// context of their own, so a cancelled ctx still ends the transaction
// cleanly.
//
// fn must do all its writes through tx, and must not commit or roll it back.
func (g *Guard) Do(ctx context.Context, resource string, token int64, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	if err := g.validate(resource, token); err != nil {
		return err
	}
	if fn == nil {
		return invalid("nil fn")
	}
	ctx, span := g.tel.tracer.Start(ctx, "redfence.fenced.Do", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrResource.String(resource), attrToken.Int64(token)))
	defer func() { endSpan(span, err) }()

	tx, err := g.db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("fenced: begin: %w", err)
	}
	done := false
	defer func() {
		if !done { // an error, a stale token, or fn panicked
			rollback(ctx, tx)
		}
	}()
	if err := g.check(ctx, tx, resource, token, span); err != nil {
		return err
	}
	if err := fn(ctx, tx); err != nil {
		return err
	}
	done = true // Commit ends the transaction even when it fails.
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("fenced: commit: %w", err)
	}
	return nil
}

// Check records token for resource inside tx, which the caller began and
// will commit. It must be the first statement of that transaction: writes
// made before it are not fenced. On a stale token it returns a
// *StaleTokenError and the caller must roll tx back; any writes committed
// anyway are not protected. Under REPEATABLE READ or SERIALIZABLE it must
// come first for another reason too: the snapshot is taken at the first
// statement, and the fence row has to be read in it.
func (g *Guard) Check(ctx context.Context, tx pgx.Tx, resource string, token int64) (err error) {
	if err := g.validate(resource, token); err != nil {
		return err
	}
	if tx == nil {
		return invalid("nil transaction")
	}
	ctx, span := g.tel.tracer.Start(ctx, "redfence.fenced.Check", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrResource.String(resource), attrToken.Int64(token)))
	defer func() { endSpan(span, err) }()
	return g.check(ctx, tx, resource, token, span)
}

func (g *Guard) validate(resource string, token int64) error {
	switch {
	case g == nil:
		return invalid("nil Guard")
	case g.err != nil:
		return g.err
	case resource == "":
		return invalid("empty resource")
	case token < 0:
		return invalid("negative token %d", token)
	}
	return nil
}

// check runs the fence upsert. The upsert locks the resource's row (also
// when its WHERE is false), so the SELECT that follows on the stale path
// reads the row as it stands under our lock.
func (g *Guard) check(ctx context.Context, tx pgx.Tx, resource string, token int64, span trace.Span) error {
	var got int64
	err := tx.QueryRow(ctx, g.upsert, resource, token).Scan(&got)
	if err == nil {
		span.SetAttributes(attrOutcome.String("accepted"), attrHighest.Int64(got))
		g.tel.checks.Add(ctx, 1, metric.WithAttributes(attrOutcome.String("accepted")))
		return nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("fenced: check %q: %w", resource, err)
	}
	if err := tx.QueryRow(ctx, g.highest, resource).Scan(&got); err != nil {
		return fmt.Errorf("fenced: check %q: read highest token: %w", resource, err)
	}
	span.SetAttributes(attrOutcome.String("stale"), attrHighest.Int64(got))
	g.tel.checks.Add(ctx, 1, metric.WithAttributes(attrOutcome.String("stale")))
	return &StaleTokenError{Resource: resource, Token: token, Highest: got}
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
)

func endSpan(span trace.Span, err error) {
	if err != nil && !errors.Is(err, ErrStaleToken) {
		span.SetAttributes(attrOutcome.String("error"))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
