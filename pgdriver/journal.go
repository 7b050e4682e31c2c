package pgdriver

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/redfence/redfence/mutex/backend"
)

// TermsTable keeps election terms (package election's journal), and
// TermHeadsTable each key's newest term, whose row lock orders appends and
// resignations; both beside the lease table in its schema.
const (
	TermsTable     = "redfence_terms"
	TermHeadsTable = "redfence_term_heads"
)

// journalPoll is how often a Terms call that waits looks for a new term.
const journalPoll = 100 * time.Millisecond

var _ backend.TermJournal = (*Driver)(nil)

type journalStatements struct {
	appendTerm, resign, terms, last string
}

// prepareJournal builds the journal's statements. An append raises the
// key's head only above its last term, and records the term only when it
// did: two appends of one key are decided one after the other on the
// head's row, never a lower term after a higher.
func prepareJournal(terms, heads string) journalStatements {
	const cols = `term, value, owner, at_ms, resigned_ms`
	return journalStatements{
		appendTerm: `WITH h AS (
	INSERT INTO ` + heads + ` AS h (key, last) VALUES ($1, $2)
	ON CONFLICT (key) DO UPDATE SET last = excluded.last WHERE h.last < excluded.last
	RETURNING h.key
), ins AS (
	INSERT INTO ` + terms + ` (key, ` + cols + `) SELECT h.key, $2, $3, $4, $5, NULL FROM h
)
SELECT EXISTS (SELECT 1 FROM h)`,
		// Locking the head orders a resignation and a newer term's append.
		resign: `WITH h AS (
	SELECT key FROM ` + heads + ` WHERE key = $1 AND last = $2 FOR UPDATE
)
UPDATE ` + terms + ` AS t SET resigned_ms = $3 FROM h WHERE t.key = h.key AND t.term = $2 RETURNING 1`,
		terms: `SELECT ` + cols + ` FROM ` + terms + ` WHERE key = $1 AND term > $2 ORDER BY term LIMIT 1000`,
		last:  `SELECT ` + cols + ` FROM ` + terms + ` WHERE key = $1 ORDER BY term DESC LIMIT 1`,
	}
}

// journalTables is what Migrate creates for the journal.
func journalTables(terms, heads string) []string {
	return []string{
		`CREATE TABLE IF NOT EXISTS ` + heads + ` (
	key  text PRIMARY KEY,
	last bigint NOT NULL
)`,
		`CREATE TABLE IF NOT EXISTS ` + terms + ` (
	key         text NOT NULL,
	term        bigint NOT NULL,
	value       text NOT NULL,
	owner       text NOT NULL,
	at_ms       bigint NOT NULL,  -- the leader's clock, as TermRecord.At
	resigned_ms bigint,           -- NULL unless resigned
	PRIMARY KEY (key, term)
)`,
	}
}

// AppendTerm records r as key's newest term when it exceeds every term
// recorded for key.
func (d *Driver) AppendTerm(ctx context.Context, key string, r backend.TermRecord) (bool, error) {
	switch {
	case ctx == nil:
		return false, invalidf("nil context")
	case key == "", r.Term <= 0:
		return false, invalidf("term record: a key and a positive term")
	}
	var ok bool
	if err := d.db.QueryRow(ctx, d.journal.appendTerm, key, r.Term, r.Value, r.Owner, r.At.UnixMilli()).Scan(&ok); err != nil {
		return false, failed("append term", err)
	}
	return ok, nil
}

// ResignTerm marks term resigned at at while it is key's newest.
func (d *Driver) ResignTerm(ctx context.Context, key string, term int64, at time.Time) (bool, error) {
	if ctx == nil {
		return false, invalidf("nil context")
	}
	tag, err := d.db.Exec(ctx, d.journal.resign, key, term, at.UnixMilli())
	if err != nil {
		return false, failed("resign term", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Terms returns key's terms above after, oldest first, each with its
// resignation folded in (a resignation never comes alone). With none it
// polls every 100 ms, up to wait: PostgreSQL pushes no journal entries.
func (d *Driver) Terms(ctx context.Context, key string, after int64, wait time.Duration) ([]backend.TermRecord, error) {
	if ctx == nil {
		return nil, invalidf("nil context")
	}
	deadline := time.Now().Add(wait)
	for {
		rows, err := d.db.Query(ctx, d.journal.terms, key, after)
		if err != nil {
			return nil, failed("read terms", err)
		}
		recs, err := pgx.CollectRows(rows, scanTerm)
		if err != nil {
			return nil, failed("read terms", err)
		}
		left := time.Until(deadline)
		if len(recs) > 0 || left <= 0 {
			return recs, nil
		}
		t := time.NewTimer(min(left, journalPoll))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// LastTerm returns key's newest term.
func (d *Driver) LastTerm(ctx context.Context, key string) (backend.TermRecord, bool, error) {
	if ctx == nil {
		return backend.TermRecord{}, false, invalidf("nil context")
	}
	rows, err := d.db.Query(ctx, d.journal.last, key)
	if err != nil {
		return backend.TermRecord{}, false, failed("last term", err)
	}
	r, err := pgx.CollectOneRow(rows, scanTerm)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return backend.TermRecord{}, false, nil
	case err != nil:
		return backend.TermRecord{}, false, failed("last term", err)
	}
	return r, true, nil
}

func scanTerm(row pgx.CollectableRow) (backend.TermRecord, error) {
	var r backend.TermRecord
	var at int64
	var resigned *int64
	err := row.Scan(&r.Term, &r.Value, &r.Owner, &at, &resigned)
	r.At, r.Resigned = time.UnixMilli(at), resigned != nil
	return r, err
}
