package mutex

import (
	"cmp"
	"slices"
	"strings"
	"time"
)

// HeldLock is a lock this Locker holds, as this process sees it (Held).
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
	// Permit: a permit of the semaphore named Key (Semaphore.Acquire), not
	// a lock; Count is then 1.
	Permit bool
	// RW is "read" or "write" for a hold of the read-write lock named Key
	// (RWMutex), "" otherwise; Count is then 1.
	RW string
}

// Held lists the locks, the semaphores' permits and the read-write locks'
// holds this Locker holds, by key: what a debug page of a process shows
// (mutex/lockdebug). It makes no round trip.
func (l *Locker) Held() []HeldLock {
	if l == nil || l.renew == nil {
		return nil
	}
	l.renew.mu.Lock()
	locks := make([]*Lock, 0, len(l.renew.locks))
	for lk := range l.renew.locks {
		locks = append(locks, lk)
	}
	l.renew.mu.Unlock()
	now := l.now()
	out := make([]HeldLock, 0, len(locks))
	qkeys := make([]string, 0, len(locks))
	for _, lk := range locks {
		lk.mu.Lock()
		if lk.done {
			lk.mu.Unlock()
			continue
		}
		h := HeldLock{
			Key: lk.key, Token: lk.token, Acquired: lk.acquired, HeldFor: now.Sub(lk.acquired),
			Lease: max(lk.deadline.Sub(now), 0), TTL: lk.ttl, Count: lk.count,
			AutoRenew: lk.autoRenew, Renewals: lk.renewals, LastRenewal: lk.renewRTT,
			Permit: familyOf(lk) == familyPermit, RW: rwMode(lk),
		}
		lk.mu.Unlock()
		out = append(out, h)
		if lk.kind != nil {
			qkeys = append(qkeys, lk.kind.queueKey())
		} else {
			qkeys = append(qkeys, lk.key)
		}
	}
	l.mu.Lock()
	for i := range out {
		if q := l.queues[qkeys[i]]; q != nil {
			out[i].Waiters = len(q.waiters)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b HeldLock) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.Token, b.Token)
	})
	return out
}
