package backend

import (
	"context"
	"errors"
	"time"
)

// ErrBadCursor is what Inspector.List returns for a cursor it did not hand
// out (or no longer can continue); the Locker reports it as bad input.
var ErrBadCursor = errors.New("backend: cursor is not one List returned")

// Inspector is optional: a Backend that shows its locks to operators and
// can end a holder's lease behind its back. Package mutex/admin's Inspect,
// List and ForceRelease (and so the redfence command and the debug page) use it;
// without it they return an error matching errors.ErrUnsupported. Keys
// arrive and return as the caller names them, without the backend's own
// prefix; matching keys against a pattern is the caller's.
type Inspector interface {
	// Inspect returns key's state. It changes nothing.
	Inspect(ctx context.Context, key string) (KeyState, error)
	// List returns a page of the backend's keys, from r.Cursor on.
	// A key present for the whole listing is returned at least once; keys
	// that come and go meanwhile may or may not be. A cursor it cannot
	// continue gets an error matching ErrBadCursor; a listing that could
	// not look gets an error, never an empty page.
	List(ctx context.Context, r ListRequest) (ListPage, error)
	// ForceRelease frees key when it is held under f.Token (0: whoever
	// holds it), whatever its count. On success every later token of key
	// exceeds Forced.Floor (at least the holder's token + 1), the holder's
	// Release and Extend find it gone, watchers are woken, and a
	// ForceRecord stays for Inspect. When Released is false and the error
	// nil, nothing changed. With an error the outcome is unknown on the
	// servers that did not answer; Released then says some did free it.
	ForceRelease(ctx context.Context, key string, f Force) (Forced, error)
}

// HoldLister is optional: an Inspector whose listing also shows the
// semaphores (Semaphorer) and read-write locks (RWLocker) it keeps, found
// by the same reads. admin.List uses it when the backend has it; without
// it a listing shows locks alone, and says that it looked for nothing else.
type HoldLister interface {
	// ListHolds is List, with ListPage.Semaphores and ListPage.RWLocks
	// filled in: every semaphore and read-write lock whose key matches
	// r.Match, held or not, as InspectSemaphore and InspectRW read them,
	// under List's guarantees (a key present for the whole listing is
	// returned at least once) and List's cursors. Limit counts them with
	// the locks.
	ListHolds(ctx context.Context, r ListRequest) (ListPage, error)
}

// ListRequest bounds one List call.
type ListRequest struct {
	Cursor string // "" starts a listing; else a ListPage.Cursor
	// Match is a glob (*, ?, [...], \ escapes) over keys, "" for all: a hint a backend may narrow its reads by; the Locker
	// filters the keys again.
	Match string
	Count int // keys to look at per round trip, 1..100000
	Scans int // round trips to look for keys, 1..1000
	// Limit ends the page once it holds Limit keys (0: Scans round
	// trips); keys already read may make it longer.
	Limit int
}

// ListPage is one List call's part of a listing.
type ListPage struct {
	Keys       []KeyState
	Cursor     string // continues the listing; "" once every key was returned
	RoundTrips int    // calls to several servers at once count as one
	// Skipped says why the page is partial: the servers it could not read
	// while enough others answered. Empty for a whole page.
	Skipped []error
	// Semaphores and RWLocks are what HoldLister.ListHolds found beside
	// the locks; List leaves them empty.
	Semaphores []SemaphoreKey
	RWLocks    []RWKey
}

// SemaphoreKey is a semaphore a listing found.
type SemaphoreKey struct {
	Key string // as the Locker's caller names it
	SemaphoreState
}

// RWKey is a read-write lock a listing found.
type RWKey struct {
	Key string // as the Locker's caller names it
	RWState
}

// KeyState is a key as its backend holds it, at Now (the backend's clock).
type KeyState struct {
	Key  string // as the Locker's caller names it
	Name string // the backend's own name for it, when not Key
	// Owner holds the key, or (Count 0) the key is kept for it; "" when
	// free.
	Owner string
	// Token is the holder's, or for a free key the last issued (0: none
	// remembered).
	Token int64
	Count int // the holder's count; 0: reserved for Owner
	// AcquiredAt is when Token was issued, RenewedAt when the lease began,
	// Lease what is left of it (the key is free when not positive); zero
	// when unknown.
	AcquiredAt time.Time
	RenewedAt  time.Time
	Lease      time.Duration
	Waited     bool     // a waiting call found it held since it was acquired
	Waiters    []Waiter // queued owners, longest waiting first
	Forced     []ForceRecord
	Now        time.Time
	// Nodes is, for a backend of independent servers deciding by quorum
	// (Redlock), each one's view; the fields above are the quorum's.
	Nodes []NodeState
}

// NodeState is one server's view of a key in a quorum backend.
type NodeState struct {
	Node  int
	Addr  string
	State KeyState // without Nodes
	Err   error
}

// Waiter is an owner queued for a key in the backend.
type Waiter struct {
	ID    string
	Since time.Time
}

// Force names the holder a forced release ends, and who asks why.
type Force struct {
	Token  int64 // 0: whoever holds the key
	By     string
	Reason string
}

// ForceRecord is an audit entry of a forced release, latest first in
// KeyState.Forced.
type ForceRecord struct {
	ID     string
	At     time.Time
	By     string
	Reason string
	Token  int64 // the holder's, which lost the key
	Floor  int64 // later tokens exceed it
	Owner  string
	Count  int
}

// Forced is what a forced release found. When Released is false, Token is
// the token the key is held under (0: nobody holds it) and the rest is
// zero.
type Forced struct {
	Released bool
	Token    int64
	Floor    int64
	Owner    string
	Count    int
	Servers  int // how many servers freed it (Redlock: nodes); 0 counts as 1 when Released
}
