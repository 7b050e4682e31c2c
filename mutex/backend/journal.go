package backend

import (
	"context"
	"time"
)

// TermJournal is optional: a Backend that keeps, beside a lock key, the
// journal of the terms of an election held on that key (package election).
// A term is a token of the key; the journal records each term once, in
// increasing order, and refuses a term that is not above the last one, so
// that observers read every term in order, never a lower one after a
// higher. Without it, package election reads the leader from Inspector
// and its observers poll, which misses terms shorter than the poll.
type TermJournal interface {
	// AppendTerm records r as the newest term of key when r.Term exceeds
	// every term recorded for key: true. False, with a nil error, when a
	// term at least as high is recorded: nothing changed.
	AppendTerm(ctx context.Context, key string, r TermRecord) (bool, error)
	// ResignTerm marks term resigned at at (its leader gave it up cleanly)
	// when it is still the newest of key: true; false, nothing changed,
	// when a newer term was recorded.
	ResignTerm(ctx context.Context, key string, term int64, at time.Time) (bool, error)
	// Terms returns key's records above after (0: from the oldest kept),
	// oldest first: a term's start, and its resignation (Resigned, Value
	// and Owner empty) unless the start is in the same answer, which then carries
	// it. With none, it waits up to wait for one (0: it does not wait) and
	// returns an empty slice when none came. A journal keeps at least the
	// latest 100 terms.
	Terms(ctx context.Context, key string, after int64, wait time.Duration) ([]TermRecord, error)
	// LastTerm returns key's newest record; ok is false when none is kept.
	LastTerm(ctx context.Context, key string) (r TermRecord, ok bool, err error)
}

// TermRecord is one term of an election in a TermJournal.
type TermRecord struct {
	Term     int64     // the token of the election's key that began it, > 0
	Value    string    // what the leader campaigned with
	Owner    string    // the lock's owner id; empty for a resignation alone
	At       time.Time // when the term began (resigned, for a resignation alone), by the leader's clock (ms)
	Resigned bool      // the leader gave the term up before losing it
}
