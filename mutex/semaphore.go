package mutex

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// MaxLimit bounds a semaphore's limit: every permit is a holder the
// backend keeps and every script reads, and a limit in the millions is
// almost always a bug (a byte count given as a count).
const MaxLimit = 1 << 16

// Semaphore hands out at most a limit of permits on one name, across every
// Locker of the backend (Locker.Semaphore). Each permit is held as a lock
// is: its own holder id, a lease on the backend's clock renewed in the
// Locker's batches, a context that ends when it is lost, and a fencing
// token. It is safe for concurrent use and holds no goroutine of its own:
// the Locker's Close releases its permits.
//
// The design choices, against the known failures of semaphores:
//   - A permit is its holder, never a count: the backend keeps the set of
//     live holders, so a release of a permit not held (twice, late, after
//     its lease ran out) changes nothing and never adds a permit.
//   - Leases run on the backend's clock, and every script of the Redis
//     driver takes out the holders whose lease ran out before it does
//     anything else: a dead process's permit comes back within one lease,
//     and never before that holder's local deadline (which ends the
//     permit's context first, by the drift margin).
//   - Waiting makes no herd: goroutines of one Locker wait in one FIFO
//     queue per semaphore and only its head asks the backend; a release
//     in this process wakes the head directly, one elsewhere through the
//     backend's notification (backend.Semaphorer.WatchPermits), and a poll
//     bounded by the shortest lease left covers lost notifications and
//     dead holders.
//   - The limit lives in the backend: n given to Locker.Semaphore is stored
//     by the first grant when none is, SetLimit changes it for everyone,
//     and lowering it takes no permit back.
//
// Tokens increase per semaphore across every permit; they are the
// semaphore's own sequence, not that of the lock of the same name (see the
// driver's doc), so a fence shared by both needs a resource name for each.
type Semaphore struct {
	holdTarget              // its queue's key is semQueueKey
	limit      atomic.Int64 // what an attempt stores when the backend has none
}

// Semaphore returns the semaphore of name with n permits, for Acquire and
// TryAcquire. n is stored as the limit by the first permit granted when
// the backend holds none for name (first use, or after every trace of it
// expired, WithFenceTTL after its last use); otherwise the stored limit
// applies, and SetLimit changes it for every process. Options are those
// of Lock: WithTTL (each permit's lease), WithAutoRenew, WithRetry;
// WithOwner and WithReplicaAck are refused (ErrInvalid): a permit's holder
// is random per acquisition.
//
// It sends nothing. A backend without semaphores (Redlock, an outside
// backend without backend.Semaphorer) returns an error matching
// errors.ErrUnsupported; a bad name, n outside 1..MaxLimit or a bad option
// one matching ErrInvalid.
func (l *Locker) Semaphore(name string, n int, opts ...LockOption) (*Semaphore, error) {
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
	s := &Semaphore{holdTarget: holdTarget{l: l, name: name, key: l.name(name), qkey: semQueueKey(name), lc: lc}}
	s.limit.Store(int64(n))
	return s, nil
}

var errSemaphoreUnsupported = fmt.Errorf("%w: this Locker's backend keeps no semaphores (Redlock, or a backend without backend.Semaphorer)", errors.ErrUnsupported)

// semQueueKey is the key of a semaphore's queue among the Locker's local
// queues, apart from the locks': a lock key beginning with a NUL byte
// would share its queue (no harm but waits: a semaphore's waiters are
// never handed a lock), and no user key does.
func semQueueKey(name string) string { return "\x00semaphore\x00" + name }

// Name returns the semaphore's name.
func (s *Semaphore) Name() string { return s.name }

// SetLimit sets the semaphore's limit to n for every process, from now on.
// Permits held are never taken back: a lower limit only stops grants until
// fewer are held; a higher one wakes waiters. On a server error returns it
// (the limit may or may not have changed). n outside 1..MaxLimit returns an
// error matching ErrInvalid and sends nothing.
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
// head of its local queue.
func (s *Semaphore) watch() (<-chan struct{}, func()) {
	ready, stop := s.l.drv.sem.WatchPermits(s.key, func() { s.l.wakeLocal(s.qkey) })
	if stop == nil {
		stop = func() {}
	}
	return ready, stop
}
