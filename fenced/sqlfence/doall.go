package sqlfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/internal/cause"
)

// A Claim is one resource a DoAll or CheckAll is fenced on, and the token
// the caller holds for it (the token of its lock on that resource). It is
// package fence's type, fenced.Claim too.
type Claim = fence.Claim

// DoAll is Do fenced on several resources at once: it runs fn in one
// transaction that first records each claim's token for its resource, and
// commits fn's writes only if none of the tokens is stale.
//
// DoAll records the claims sorted by resource (as bytes), each resource
// once, whatever order claims lists them in, so that two DoAll calls that
// share resources take their fence rows in one order and wait for each
// other without a deadlock (SQLite: the first record takes the database's
// write lock, for every resource at once). Each row stays locked until the
// transaction ends, as Do's does. The first claim, in that order, whose
// token is lower than the highest recorded for its resource ends DoAll: it
// rolls back without calling fn, records no token, and returns the
// *StaleTokenError a Do with that claim alone would (errors.Is
// ErrStaleToken), naming that resource. Otherwise fn runs and DoAll
// commits as Do does: every token is recorded with fn's writes, or none.
// On PostgreSQL every claimed resource is declared in the transaction, so a
// table under fenced.Guard.Protect accepts fn's rows of any of them, and
// refuses those of a resource not claimed.
//
// Before any round trip, DoAll returns an error matching ErrInvalid for
// everything Do refuses, and for no claims or one resource claimed with
// two different tokens; a resource claimed twice with one token counts
// once. Everything else (fn's error or panic, the database's errors, the
// telemetry) is as for Do. The fence costs a statement per resource (two
// on MySQL when the token is not recorded anew), in one transaction.
//
// fn must do all its writes through tx, and must not commit or roll it back.
func (g *Guard) DoAll(ctx context.Context, claims []Claim, fn func(ctx context.Context, tx *sql.Tx) error) error {
	claims, err := g.validateAll(ctx, claims)
	if err != nil {
		return err
	}
	return g.do(ctx, "DoAll", claims, fn)
}

// CheckAll is Check for several resources at once: it records each
// claim's token inside tx, which the caller began and will commit, in
// DoAll's order (sorted by resource, each once), so that concurrent
// callers never deadlock in the fence. Like Check it must come first in
// tx, and it refuses to follow a read as Check does in each dialect
// (ErrCheckNotFirst, nothing recorded). On the first stale claim in that
// order it returns that claim's *StaleTokenError; the claims before it
// are recorded in tx, so roll tx back, as after any error of Check. Bad
// arguments are reported as by DoAll and Check, before any round trip.
//
// Use it rather than several Check calls: besides the order, on MySQL a
// Check after another compares the fence row with a snapshot the first
// took, and may refuse a resource whose previous holder committed while
// it waited.
func (g *Guard) CheckAll(ctx context.Context, tx *sql.Tx, claims []Claim) error {
	claims, err := g.validateAll(ctx, claims)
	if err != nil {
		return err
	}
	if tx == nil {
		return invalid("nil transaction")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlfence: %w", cause.Wrap(ctx, err))
	}
	return g.checkIn(ctx, "CheckAll", tx, claims)
}

// validateAll is usable plus fence.Canonical: the claims DoAll and
// CheckAll record, in the order they record them.
func (g *Guard) validateAll(ctx context.Context, claims []Claim) ([]Claim, error) {
	return fence.UsableAll(ctx, "Guard", g == nil, g != nil && g.db != nil, claims)
}
