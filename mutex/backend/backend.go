// Package backend is the contract between a mutex.Locker and the servers
// that hold its locks. A Locker keeps the local machinery (the per-key
// queue of waiting calls, hand-off between them, reentrancy through the
// context, the lease deadline, renewal, the loss signal and telemetry); a
// Backend keeps the locks themselves. mutex.New and mutex.NewRedlock build
// their own Redis backends; mutex.NewWithBackend takes any Backend, such
// as one over a consensus store with revisions as tokens.
//
// The package imports only the standard library, so that a backend in
// another module depends on this contract and nothing else.
//
// Every Backend keeps these rules; the Locker's guarantees rest on them:
//
//  1. Tokens strictly increase per key across every holder, across
//     processes, expiry and restarts.
//  2. A lease runs from no earlier than the Acquire or Extend call was
//     made, and the key is never granted to another owner before it ends.
//  3. Release and Extend change nothing unless owner and token match.
//  4. Outcomes are told truthfully: an error means the outcome is unknown,
//     never "held by another"; the Locker then frees what the attempt may
//     have taken (Abandon, for the random owners it makes up itself).
//  5. Every method returns by its context's deadline.
//
// docs/architecture.md has the picture of the parts.
package backend

import (
	"context"
	"time"
)

// Backend holds locks. Keys arrive with the Locker's prefix already on
// them; an owner is an opaque id (random per attempt, or the caller's
// WithOwner) that a Backend compares, never parses.
type Backend interface {
	// Acquire makes one attempt. It grants the key to a.Owner when free,
	// re-enters (one more count, same token, lease set to a.TTL) when
	// a.Owner holds it already, or says who holds it and for how long:
	// the Locker's poll waits at most that long.
	Acquire(ctx context.Context, a Attempt) (Grant, error)
	// Release takes one count of the lease: the counts left (0: the key is
	// free), or -1 when owner and token do not hold it. A release that
	// frees the key should wake the key's watchers (see Watcher).
	Release(ctx context.Context, l Lease) (left int64, err error)
	// Extend sets each lease to its TTL, from no earlier than the call:
	// one Renewal per lease, in order. An error applies to the leases
	// whose Renewal is Unknown.
	Extend(ctx context.Context, leases []Lease) ([]Renewal, error)
	// TTL is the lease l has left; negative when owner and token do not
	// hold the key.
	TTL(ctx context.Context, l Lease) (time.Duration, error)
	// Abandon frees key if owner holds it, whatever the count: the clean-up
	// of an attempt with a random owner (never one given with WithOwner)
	// whose outcome is unknown, or whose grant the Locker refused (it came
	// after its lease, or without a token). It runs after that attempt's
	// call returned, on a context of its own, and may run after the
	// Locker's Close returned while a Lock call was still in Acquire.
	Abandon(ctx context.Context, key, owner string) error
}

// Watcher is optional: a Backend that can say when a key was released.
// Without it the Locker's waiters poll, at most every remaining lease.
type Watcher interface {
	// Watch calls wake, on any goroutine and without blocking, each time
	// key may have been freed, until stop is called. A release after Watch
	// returns must be reported; one lost (a dropped connection) costs the
	// waiter a poll, and a spurious wake-up costs an attempt. Two watches
	// of one key may overlap briefly; each stop ends its own.
	Watch(key string, wake func()) (stop func())
}

// HandOffer is optional: a Backend that can release a lock and grant it to
// the next owner in one step. The Locker hands a lock to its own next
// waiter for the key this way (FIFO, at most a few times in a row before a
// plain release lets other Lockers in). Without it, an Unlock releases and
// wakes that waiter, which then makes its own attempt.
type HandOffer interface {
	// HandOff takes one count of from. When that frees the key, it grants
	// the key in the same step to next.Owner with a new token, left 0 and
	// g its Grant (Acquired); when counts are left, left > 0 and nothing is
	// handed off; -1 when from's owner and token do not hold the key. An
	// error leaves the outcome unknown: the Locker releases from once more
	// and leaves next's possible grant to run out.
	HandOff(ctx context.Context, from Lease, next Attempt) (left int64, g Grant, err error)
}

// Attempt is one try at a key.
type Attempt struct {
	Key   string
	Owner string
	TTL   time.Duration // the lease, within mutex.MinTTL..MaxTTL
}

// Status is what an attempt found.
type Status int

const (
	// Held: another owner holds the key.
	Held Status = iota
	// Acquired: the key is the attempt's owner's, with a new token.
	Acquired
	// Reentered: the owner held the key already; same token, one more
	// count.
	Reentered
)

// Grant is the answer to an attempt.
type Grant struct {
	Status Status
	Token  int64 // Acquired, Reentered: the fencing token, > 0
	// Remaining is the holder's lease left when Status is Held; zero or
	// negative when unknown.
	Remaining time.Duration
	// Handle is the Backend's own state of the lock granted (a lease id,
	// a session), given back in every Lease of that lock; the Locker keeps
	// it and never looks inside. Nil for none.
	Handle any
}

// Lease names a held lock: key, owner and token, and the TTL to extend it
// to (Extend only).
type Lease struct {
	Key    string
	Owner  string
	Token  int64
	TTL    time.Duration
	Handle any // what the lock's Grant carried
}

// Renewal is what Extend found for one lease.
type Renewal int

const (
	// Unknown: no answer for this lease; the Locker tries again while the
	// lease lasts.
	Unknown Renewal = iota
	// Renewed: the lease now runs TTL from the call.
	Renewed
	// Gone: owner and token no longer hold the key; the lock is lost.
	Gone
)
