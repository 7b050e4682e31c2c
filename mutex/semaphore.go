package mutex

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// MaxLimit bounds a semaphore's limit: a limit in the millions is a bug (a
// byte count given as a count).
const MaxLimit = 1 << 16

// Semaphore hands out at most a limit of permits on one key across every
// Locker of the backend (NewSemaphore). Each permit is held as a lock is:
// its own holder id, a lease on the backend's clock renewed in the
// Locker's batches, a context that ends when it is lost, and a fencing
// token that rises per semaphore (its own sequence, not the lock's of the
// same key). The backend keeps the set of live holders, not a count, so a
// double or late release never adds a permit, and a dead process's permit
// comes back within one lease. It is safe for concurrent use;
// docs/locking.md has the design.
type Semaphore struct {
	holdTarget              // its queue's key is semQueueKey
	limit      atomic.Int64 // what an attempt stores when the backend has none
}

// NewSemaphore returns l's semaphore of key with n permits. n is stored as
// the limit by the first permit granted while the backend holds none for
// key; otherwise the stored limit applies (SetLimit changes it for
// everyone). Options are Lock's WithTTL, WithAutoRenew and WithRetry;
// WithOwner and WithReplicaAck are refused. It sends nothing. A backend
// without backend.Semaphorer returns an error matching
// errors.ErrUnsupported; a bad key, n outside 1..MaxLimit or a bad option
// one matching ErrInvalid.
func NewSemaphore(l *Locker, name string, n int, opts ...LockOption) (*Semaphore, error) {
	if err := l.check(context.Background(), name); err != nil {
		return nil, err
	}
	if l.drv.sem == nil {
		return nil, errSemaphoreUnsupported
	}
	if n < 1 || n > MaxLimit {
		return nil, invalid("semaphore limit %d outside 1..%d", n, MaxLimit)
	}
	lc := newLockConfig(opts)
	switch {
	case lc.err != nil:
		return nil, lc.err
	case lc.owner != "":
		return nil, invalid("WithOwner does not apply to a semaphore: a permit's holder is random per acquisition")
	case lc.replicas > 0:
		return nil, invalid("WithReplicaAck does not apply to a semaphore")
	}
	s := &Semaphore{holdTarget: holdTarget{l: l, name: name, key: name, qkey: semQueueKey(name), lc: lc}}
	s.limit.Store(int64(n))
	return s, nil
}

var errSemaphoreUnsupported = fmt.Errorf("%w: this Locker's backend keeps no semaphores (Redlock, or a backend without backend.Semaphorer)", errors.ErrUnsupported)

// semQueueKey is the key of a semaphore's queue among the Locker's local
// queues, apart from the locks': a lock key beginning with a NUL byte
// would share its queue (no harm but waits: a semaphore's waiters are
// never handed a lock), and no user key does.
func semQueueKey(name string) string { return "\x00semaphore\x00" + name }

// Key returns the semaphore's key.
func (s *Semaphore) Key() string { return s.name }

// SetLimit sets the limit to n for every process. Permits held are never
// taken back: a lower limit stops grants until fewer are held; a higher one
// wakes waiters. On a store error the limit may or may not have changed. n
// outside 1..MaxLimit returns ErrInvalid and sends nothing.
func (s *Semaphore) SetLimit(ctx context.Context, n int) error {
	if err := s.usable(ctx); err != nil {
		return err
	}
	if n < 1 || n > MaxLimit {
		return invalid("semaphore limit %d outside 1..%d", n, MaxLimit)
	}
	s.limit.Store(int64(n))
	if err := s.l.drv.sem.SetLimit(ctx, s.key, n); err != nil {
		return unavailable(err)
	}
	s.l.wakeLocal(s.qkey)
	return nil
}

// PermitHolder is a permit as the backend sees it (Semaphore.Holders).
type PermitHolder struct {
	Owner     string    // the holder id
	OwnerInfo OwnerInfo // the holder's Locker's WithOwnerInfo, when it set one
	Token     int64
	Lease     time.Duration // left, by the backend's clock
}

// Holders returns the semaphore's stored limit (0 when the backend holds
// none) and its live permits, by the end of their lease: what `redfence
// inspect` shows. It makes one round trip.
func (s *Semaphore) Holders(ctx context.Context) (limit int, holders []PermitHolder, err error) {
	if err := s.usable(ctx); err != nil {
		return 0, nil, err
	}
	st, err := s.l.drv.sem.InspectSemaphore(ctx, s.key)
	if err != nil {
		return 0, nil, unavailable(err)
	}
	for _, h := range st.Holders {
		info, _ := parseOwner(h.Owner)
		holders = append(holders, PermitHolder{Owner: h.Owner, OwnerInfo: info, Token: h.Token, Lease: h.Left})
	}
	return st.Limit, holders, nil
}

func (s *Semaphore) usable(ctx context.Context) error {
	switch {
	case s == nil || s.l == nil:
		return invalid("nil Semaphore")
	case ctx == nil:
		return invalid("nil context")
	}
	select {
	case <-s.l.done:
		return ErrClosed
	default:
		return nil
	}
}

// watch asks the backend for the semaphore's notifications, which wake the
// head of its local queue. A nil stop (a backend that polls) leaves the
// queue unwatched, so that this Locker's own releases wake it
// (wakeAfterRelease).
func (s *Semaphore) watch() (<-chan struct{}, func()) {
	return s.l.drv.sem.WatchPermits(s.key, func() { s.l.wakeLocal(s.qkey) })
}
