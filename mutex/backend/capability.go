package backend

import (
	"context"
	"time"
)

// Watcher is optional: a Backend that can say when a key was released.
// Without it the Locker's waiters poll, at most every remaining lease.
type Watcher interface {
	// Watch calls wake, on any goroutine and without blocking, each time
	// key may have been freed, until stop is called. A release after ready
	// is closed must be reported (nil ready: after Watch returns); the
	// Locker waits for ready briefly, and polls when it does not come. A
	// watch that will report nothing (a closed backend) keeps ready open. One
	// lost (a dropped connection) costs the waiter a poll, and a spurious
	// wake-up costs an attempt. Two watches of one key may overlap briefly;
	// each stop ends its own.
	Watch(key string, wake func()) (ready <-chan struct{}, stop func())
}

// ConditionalWatcher is a Watcher that can watch only as it was built (a
// PostgreSQL driver with a session to LISTEN on): the Locker uses its
// Watch only when Watching reports true, and polls otherwise.
type ConditionalWatcher interface {
	Watcher
	Watching() bool
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

// Queuer is optional: a Backend that keeps Lockers waiting for a key in a
// queue of its own, so that a release is kept a moment for the one that
// waited longest (Attempt.Waiter, Attempt.InQueue). The Locker counts a
// Waiter as queued from an attempt that found the key Held until one is
// granted.
type Queuer interface {
	// Leave takes waiter out of key's queue: none of its calls waits for
	// the key any more. It runs in the background, on a context of its own.
	Leave(ctx context.Context, key, waiter string) error
}

// ReplicaAcker is optional: a Backend whose servers have replicas that can
// acknowledge a write (mutex.WithReplicaAck). Without it, WithReplicaAck
// is refused as bad input.
type ReplicaAcker interface {
	// AckReplicas waits up to timeout until at least n replicas have l's
	// latest write, and returns how many did.
	AckReplicas(ctx context.Context, l Lease, n int, timeout time.Duration) (acked int, err error)
}

// BulkReleaser is optional: a Backend that releases many leases in one
// step, as the Locker's Close does with those it still holds. Without it,
// Close releases them one at a time, each within a few seconds.
type BulkReleaser interface {
	// ReleaseAll takes one count of each lease; the error joins those of
	// the releases whose outcome is unknown. Close calls it on a context
	// without a deadline: it bounds its own time, whatever the number of
	// leases.
	ReleaseAll(ctx context.Context, leases []Lease) error
}
