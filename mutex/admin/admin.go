package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redfence/redfence/internal/hostlink"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// ErrPartial is matched by ListAll's error when a quorum of Redlock nodes
// answered but not every node: the locks it returns are those the others
// showed, and one held on a skipped node may be missing or free.
var ErrPartial = backend.ErrPartial

// Admin is the operator's view of one Locker: its backend's locks
// (Inspect, List, ListAll, ForceRelease, through backend.Inspector) and
// what the Locker itself holds (Held). It is safe for concurrent use and
// owns nothing: the Locker stays the caller's.
type Admin struct {
	l     *mutex.Locker
	in    backend.Inspector  // nil: the backend shows nothing
	holds backend.HoldLister // nil: its listing shows locks alone
	sem   backend.Semaphorer // nil: it keeps no semaphores
	rw    backend.RWLocker   // nil: it keeps no read-write locks
}

// New returns an Admin over l. A nil l returns an error matching
// mutex.ErrInvalid. A backend without backend.Inspector is accepted:
// Held works, and the calls that read the backend return an error
// matching errors.ErrUnsupported.
func New(l *mutex.Locker) (*Admin, error) {
	if l == nil {
		return nil, invalid("nil Locker")
	}
	a := &Admin{l: l}
	b := l.Backend()
	a.in, _ = b.(backend.Inspector)
	a.holds, _ = b.(backend.HoldLister)
	a.sem, _ = b.(backend.Semaphorer)
	a.rw, _ = b.(backend.RWLocker)
	if a.in == nil || a.sem == nil && a.rw == nil {
		a.holds = nil // nothing to list beside the locks, or no listing
	}
	return a, nil
}

// HeldLock is a hold of the Locker, as its process sees it (Held).
type HeldLock struct {
	Key      string
	Token    int64
	Acquired time.Time     // by this process's clock
	HeldFor  time.Duration // since Acquired
	// Lease is what is left of the lease by the local deadline, which ends
	// before the server's (the drift margin); TTL is the lease renewed to.
	Lease time.Duration
	TTL   time.Duration
	// Count is the re-entries through the lock's context, plus one.
	Count int
	// AutoRenew, Renewals and LastRenewal: whether the Locker renews it,
	// how many extensions succeeded, and the round trip of the last one
	// (zero before the first).
	AutoRenew   bool
	Renewals    int
	LastRenewal time.Duration
	// Waiters are this Locker's goroutines waiting for the key (for a
	// permit of the semaphore, when Permit; for a hold, when RW).
	Waiters int
	// Permit: a permit of the semaphore named Key, not a lock; Count is
	// then 1.
	Permit bool
	// RW is "read" or "write" for a hold of the read-write lock named Key,
	// "" otherwise; Count is then 1.
	RW string
}

// Held lists the locks, the semaphores' permits and the read-write locks'
// holds the Locker holds, by key: what a debug page of a process shows
// (mutex/lockdebug). It makes no round trip.
func (a *Admin) Held() []HeldLock {
	if a == nil {
		return nil
	}
	holds := hostlink.Held(a.l)
	out := make([]HeldLock, len(holds))
	for i, h := range holds {
		out[i] = HeldLock{
			Key: h.Key, Token: h.Token, Acquired: h.Acquired, HeldFor: h.HeldFor,
			Lease: h.Lease, TTL: h.TTL, Count: h.Count, AutoRenew: h.AutoRenew,
			Renewals: h.Renewals, LastRenewal: h.LastRenewal, Waiters: h.Waiters,
			Permit: h.Kind == "permit",
		}
		if h.Kind == "read" || h.Kind == "write" {
			out[i].RW = h.Kind
		}
	}
	return out
}

// Locker is the Locker a is over.
func (a *Admin) Locker() *mutex.Locker { return a.l }

func (a *Admin) check(ctx context.Context, key string) error {
	switch {
	case a == nil:
		return invalid("nil Admin")
	case ctx == nil:
		return invalid("nil context")
	case key == "":
		return invalid("empty key")
	case len(key) > mutex.MaxKeyLen:
		return invalid("key of %d bytes exceeds %d", len(key), mutex.MaxKeyLen)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("admin: %w: "+format, append([]any{mutex.ErrInvalid}, args...)...)
}

// unavailable marks err, a read's failure on the way to or on the server,
// as an outage (mutex.ErrUnavailable) while keeping it for errors.Is/As.
func unavailable(err error) error {
	if err == nil || errors.Is(err, mutex.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", mutex.ErrUnavailable, err)
}
