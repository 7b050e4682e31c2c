// Package backend is the contract between a mutex.Locker and the servers
// that hold its locks, as database/sql/driver is database/sql's. A Locker
// keeps the local machinery (the per-key queue of waiting calls, hand-off
// between them, reentrancy through the context, the lease deadline,
// renewal, the loss signal and telemetry); a Backend keeps the locks
// themselves. Capabilities beyond Backend are optional interfaces (Watcher,
// HandOffer, Queuer, ReplicaAcker, BulkReleaser, Inspector, Batcher,
// Semaphorer), which the Locker detects once, when it is built, and does
// without when absent; and SlotClaimer and TermJournal, which packages
// runner and election ask for, not the Locker.
//
// A driver package builds a Backend and mutex.New builds a Locker over it:
// backend/redisdriver (one Redis deployment), backend/redlockdriver
// (Redlock over independent masters) and the etcddriver module.
//
// The package imports only the standard library and redfence's one
// bad-input sentinel, so that a backend in another module depends on this
// contract and nothing else.
//
// Every Backend keeps these rules; the Locker's guarantees rest on them:
//
//  1. Tokens strictly increase per key across every holder, across
//     processes, expiry and restarts.
//  2. A lease lasts at least its TTL from when the Acquire or Extend call
//     was made (one granted earlier, as a pooled etcd lease, must have
//     that much left), and the key is never granted to another owner
//     before it ends.
//  3. Release and Extend change nothing unless owner and token match.
//  4. Outcomes are told truthfully: an error means the outcome is unknown,
//     never "held by another"; the Locker then frees what the attempt may
//     have taken (Abandon, for the random owners it makes up itself),
//     unless the error matches ErrGivenBack.
//  5. Every method returns by its context's deadline.
//
// docs/architecture.md has the picture of the parts.
package backend

import (
	"context"
	"time"
)

// Backend holds locks. Keys arrive as the Locker's caller gave them; a
// backend names them in its store itself (its own prefix). An owner is an opaque id (random per attempt, or the caller's
// WithOwner) that a Backend compares, never parses.
type Backend interface {
	// Acquire makes one attempt. It grants the key to a.Owner when free,
	// re-enters (one more count, same token, lease set to a.TTL) when
	// a.Owner holds it already, or says who holds it and for how long:
	// the Locker's poll waits at most that long.
	Acquire(ctx context.Context, a Attempt) (Grant, error)
	// Release takes one count of the lease: the counts left (0: the key is
	// free), or -1 when owner and token do not hold it. A release that
	// frees the key should wake the key's watchers (see Watcher). After a
	// Release or HandOff whose outcome is unknown, the Locker calls Release
	// once more with the same Lease, in the background: a retry, which must
	// come after the first call (a re-entered key may lose two counts).
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

// Attempt is one try at a key.
type Attempt struct {
	Key   string
	Owner string
	TTL   time.Duration // the lease, within mutex.MinTTL..MaxTTL
	// Shared: the caller gave Owner (mutex.WithOwner), so other holders may
	// share it; what this attempt takes back after a failure is one count,
	// never the whole key. False for the random owners the Locker makes.
	Shared bool
	// Waiter is the Locker's id when the attempt comes from a Lock call
	// that waits if the key is held: a backend may mark the key
	// waited-for then, so that its release notifies, and a Queuer puts
	// the Locker in the key's queue. "" for a TryLock, and for a call's
	// first attempt while no other call of the Locker waits for the key.
	Waiter string
	// InQueue: an earlier attempt of Waiter found the key held and queued
	// it, and it has neither acquired nor left since (Queuer only).
	InQueue bool
	// Drift is the margin the Locker takes off TTL for clock-rate
	// differences (mutex.WithClockDrift); a backend that times a grant's
	// validity itself (Redlock) takes it off too.
	Drift time.Duration
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
	// Detail, when Status is Held, is what the backend can say beyond
	// "held" (Redlock: each node's answer, a *QuorumError); a TryLock
	// returns it instead of ErrNotAcquired. It must match ErrNotAcquired.
	Detail error
	// Handle is the Backend's own state of the lock granted (a lease id,
	// a session), given back in every Lease of that lock; the Locker keeps
	// it and never looks inside. Nil for none.
	Handle any
}

// Lease names a held lock: key, owner and token, and its lease's TTL (for
// Extend, the TTL to extend it to).
type Lease struct {
	Key    string
	Owner  string
	Token  int64
	TTL    time.Duration
	Drift  time.Duration // as Attempt.Drift, for this TTL
	Handle any           // what the lock's Grant carried; a backend may trust it over Token
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
