package backend

import (
	"context"
	"time"
)

// Semaphorer is optional: a Backend that keeps semaphores, at most a limit
// of permits per key, each permit with its own holder, lease and fencing
// token (mutex.Locker.Semaphore). Without it the Locker refuses to build a
// semaphore (errors.ErrUnsupported), before anything is sent: Redlock has
// no one place where a count of holders could be kept atomically.
//
// Its rules, beside the five of Backend:
//
//  1. A permit is a holder id in the key's set of holders with a lease on
//     the backend's clock; every method that writes first takes out the
//     holders whose lease ran out (InspectSemaphore skips them), so that
//     a dead holder's permit comes back within one lease, and never
//     sooner.
//  2. A permit is granted only while fewer holders than the limit hold
//     one. Permits are not counted down and up: the count is the set of
//     holders, so a release of a permit that is not held (twice, late,
//     or after its lease ran out) changes nothing and never adds one.
//  3. Tokens strictly increase per key across every permit granted.
//  4. Lowering the limit never takes a permit back: it only stops grants
//     until the holders are fewer than the new limit.
//
// Permits are named as locks are, by a Lease: Key (the semaphore's, with
// the Locker's prefix on it), Owner (the holder id, random per attempt),
// Token and TTL; Handle is unused.
type Semaphorer interface {
	// AcquirePermit makes one attempt: Status Acquired with the permit's
	// Token when fewer than the limit hold one (the same token again when
	// a.Owner holds one already: a retry), or Held with Remaining the
	// least lease left among the holders (when the next permit comes back
	// at the latest, unless the limit was lowered). An error leaves the
	// outcome unknown: the Locker then releases the permit a.Owner may
	// hold (ReleasePermit with Token 0) unless it matches ErrGivenBack.
	AcquirePermit(ctx context.Context, a PermitAttempt) (Grant, error)
	// ReleasePermit gives back the permit p.Owner holds of p.Key when its
	// token is p.Token (any token when p.Token is 0: the clean-up of an
	// attempt whose outcome is unknown): true when it was held, false
	// when nothing changed. A release should wake the key's watchers
	// (WatchPermits).
	ReleasePermit(ctx context.Context, p Lease) (released bool, err error)
	// ExtendPermits sets each permit's lease to its TTL, from no earlier
	// than the call, as Extend does for locks: one Renewal per permit, in
	// order; Gone when owner and token no longer hold one (released, or
	// its lease ran out and was taken back). An error applies to the
	// permits whose Renewal is Unknown.
	ExtendPermits(ctx context.Context, permits []Lease) ([]Renewal, error)
	// SetLimit sets the key's limit for every client, from now on, and
	// wakes the key's watchers. It takes back no permit held.
	SetLimit(ctx context.Context, key string, limit int) error
	// InspectSemaphore returns the key's limit and its live holders, by
	// token.
	InspectSemaphore(ctx context.Context, key string) (SemaphoreState, error)
	// WatchPermits is Watcher.Watch for the key's permits: wake is called
	// each time a permit of key may have come back (a release, a raised
	// limit), until stop. A nil stop says it does not watch (it polls):
	// the Locker then wakes its waiters after its own releases.
	WatchPermits(key string, wake func()) (ready <-chan struct{}, stop func())
}

// PermitAttempt is one try at a permit of a semaphore.
type PermitAttempt struct {
	Key   string
	Owner string        // the holder id: random per attempt, with the Locker's OwnerInfo
	TTL   time.Duration // the permit's lease
	// Limit is the limit stored for the key when it has none (the first
	// attempt, or one after every trace of the key expired); the stored
	// one, which SetLimit changes, applies otherwise. At least 1.
	Limit int
}

// SemaphoreState is what InspectSemaphore found.
type SemaphoreState struct {
	// Limit is the stored limit; 0 when none is (no permit was ever
	// granted, or every trace of the key expired).
	Limit   int
	Holders []PermitHolder // by token
}

// PermitHolder is one live permit.
type PermitHolder struct {
	Owner string
	Token int64
	Left  time.Duration // the lease left, by the backend's clock
}
