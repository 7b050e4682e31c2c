package fenced

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/fenced/fence"
)

// Raise records token for resource as Do would, without a write of its own.
// An operator raises a resource's fence after forcing its lock free, so
// that the old holder's writes, which carry a lower token, are refused from
// then on.
//
// Raise never lowers a fence and may be repeated: when a higher token is
// already recorded it changes nothing and returns that token with a nil
// error, not a *StaleTokenError. On success it returns the highest token
// recorded for resource, which is token or more. Bad arguments, a done ctx,
// a missing fence table and errors from PostgreSQL are reported as by Do.
// Raises are not counted as checks in redfence.fence.checks.
func (g *Guard) Raise(ctx context.Context, resource string, token int64) (highest int64, err error) {
	if err := g.usable(ctx, Claim{Resource: resource, Token: token}); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("fenced: %w", err)
	}
	ctx, span := g.tel.Tracer.Start(ctx, "redfence.fenced.Raise", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrResource.String(resource), attrToken.Int64(token)))
	defer func() { endSpan(span, err) }()

	tx, err := g.db.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("fenced: begin: %w", err)
	}
	defer rollback(ctx, tx) // a no-op once committed
	if highest, err = g.record(ctx, tx, "raise", resource, token); err != nil {
		return 0, err
	}
	span.SetAttributes(attrOutcome.String(outcomeOf(token, highest)), attrHighest.Int64(highest))
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("fenced: commit: %w", err)
	}
	return highest, nil
}

// Fence is one row of the fence table: the highest token recorded for
// Resource, and when a check or a raise last recorded it.
type Fence struct {
	Resource  string
	Token     int64
	UpdatedAt time.Time
}

// MaxFences is the most rows one call of Fences returns.
const MaxFences = 10000

// Fences returns up to limit rows of the fence table whose resource starts
// with prefix, ordered by resource (in the column's collation), so that an
// operator can see what is fenced. An empty prefix matches every row, and
// prefix is matched literally: % and _ are not wildcards. No match is an
// empty result and a nil error.
//
// Before any round trip, Fences returns an error matching ErrInvalid for a
// limit outside 1 to MaxFences, a prefix that breaks a resource's limits
// (see Do; it may be empty), or an unusable Guard or nil ctx as Do does; a
// ctx already done returns ctx.Err() (wrapped). When the fence table does
// not exist, Fences returns an error matching ErrNotMigrated; other errors
// from PostgreSQL come back wrapped with %w.
func (g *Guard) Fences(ctx context.Context, prefix string, limit int) ([]Fence, error) {
	if err := g.usable(ctx); err != nil {
		return nil, err
	}
	if err := fence.ValidatePrefix(prefix); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxFences {
		return nil, invalid("limit %d outside 1 to %d", limit, MaxFences)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("fenced: %w", err)
	}
	tx, err := g.db.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("fenced: begin: %w", err)
	}
	defer rollback(ctx, tx) // it only read
	rows, _ := tx.Query(ctx, `SELECT resource, token, updated_at FROM `+g.table+`
WHERE starts_with(resource, $1) ORDER BY resource LIMIT $2`, prefix, limit)
	fences, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Fence])
	switch {
	case err == nil:
		return fences, nil
	case undefinedTable(err): // the query names no other table
		return nil, fmt.Errorf("%w: %s: %w", ErrNotMigrated, g.table, err)
	default:
		return nil, fmt.Errorf("fenced: fences %q: %w", clip(prefix), err)
	}
}
