package backend

import (
	"context"
	"time"
)

// RWLocker is optional: a Backend that keeps read-write locks, many readers
// or one writer per key (mutex.Locker.RWMutex). Without it the Locker
// refuses to build one (errors.ErrUnsupported), before anything is sent.
//
// Its rules, beside the five of Backend:
//
//  1. A hold is a holder id with a lease on the backend's clock: the
//     writer, or each reader of a set of readers, never both. Every method
//     that writes first takes out the holds and waiting marks whose lease
//     ran out, so a dead reader's hold ends with its lease, and not sooner.
//  2. Writers go first: a write attempt refused because of holders, with
//     Queue set, marks its owner as a waiting writer for its TTL (each such
//     attempt renews the mark); while a live mark exists no read is
//     granted, so a steady stream of readers cannot keep a writer out
//     beyond the leases of the readers it found. A release with Token 0
//     (the clean-up of an attempt, or of a call that gave up) takes the
//     owner's mark out too.
//  3. A write grant's token strictly increases per key; a read grant's is
//     the token of the last write granted before it (0 when none was).
//  4. DowngradeRW turns the owner's write hold into a read hold with the
//     same token, in one step: no other writer comes between.
//
// Holds are named as locks are, by a Lease: Key (with the Locker's prefix
// on it), Owner (random per acquisition), Token and TTL; Handle is unused.
type RWLocker interface {
	// AcquireRW makes one attempt: Status Acquired with the token of rule
	// 3 (the same grant again when a.Owner holds already: a retry), or Held
	// with Remaining the least lease left among the holds in the way. An
	// error leaves the outcome unknown: the Locker then releases what
	// a.Owner may hold (ReleaseRW with Token 0) unless it matches
	// ErrGivenBack.
	AcquireRW(ctx context.Context, a RWAttempt) (Grant, error)
	// ReleaseRW gives back the hold h.Owner has on h.Key (for a writer,
	// only when its token is h.Token, or h.Token is 0), and with Token 0
	// the owner's waiting mark: true when a hold was given back. It should
	// wake the key's watchers (WatchRW) when that may let an attempt in.
	ReleaseRW(ctx context.Context, h Lease) (released bool, err error)
	// ExtendRW sets each hold's lease to its TTL from no earlier than the
	// call, as Extend does for locks: one Renewal per hold, in order; Gone
	// when the owner holds nothing (released, or its lease ran out).
	ExtendRW(ctx context.Context, holds []Lease) ([]Renewal, error)
	// DowngradeRW makes h's write hold a read hold with a lease of h.TTL
	// (rule 4): true too when h.Owner reads with h.Token already (a retry
	// after an unknown outcome), false when it holds neither.
	DowngradeRW(ctx context.Context, h Lease) (ok bool, err error)
	// InspectRW returns the key's live holds.
	InspectRW(ctx context.Context, key string) (RWState, error)
	// WatchRW is Watcher.Watch for the key's holds: wake is called each
	// time an attempt on key may succeed (a release, a downgrade, a mark
	// taken out), until stop; a nil stop as WatchPermits.
	WatchRW(key string, wake func()) (ready <-chan struct{}, stop func())
}

// RWAttempt is one try at a read-write lock.
type RWAttempt struct {
	Key   string
	Owner string        // the holder id: random per acquisition
	TTL   time.Duration // the hold's lease; a waiting writer's mark's too
	Write bool
	// Queue: the caller waits when refused, so a refused write attempt
	// marks its owner as a waiting writer (rule 2). A try without waiting
	// leaves no mark.
	Queue bool
}

// RWState is what InspectRW found.
type RWState struct {
	Writer  *RWHolder  // nil when no write is held
	Readers []RWHolder // by the end of their lease
	// Waiting is the number of live waiting writers' marks.
	Waiting int
	// LastWrite is the token of the last write granted (0 when none, or
	// every trace of the key expired).
	LastWrite int64
}

// RWHolder is one live hold.
type RWHolder struct {
	Owner string
	Token int64         // the write's token; a reader's is rule 3's
	Left  time.Duration // the lease left, by the backend's clock
}
