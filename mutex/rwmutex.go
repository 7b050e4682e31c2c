package mutex

import (
	"context"
	"errors"
	"fmt"

	"github.com/redfence/redfence/mutex/backend"
)

// ErrUpgrade is returned at once by RWMutex.Lock and TryLock called with a
// context that carries a read hold of the same RWMutex (RWHold.Context or
// Join): a reader that waits to write waits for itself, as every reader
// that does so waits for the others, so an upgrade is refused, never
// waited for. Unlock the read, then Lock; or take the write first and
// Downgrade.
var ErrUpgrade = errors.New("mutex: read-write lock: a reader cannot upgrade to writing")

// RWMutex is a read-write lock on one name, across every Locker of the
// backend (Locker.RWMutex): many readers or one writer. Each hold is taken
// as a lock is: its own holder id, a lease on the backend's clock renewed
// in the Locker's batches by its own process only, and a context that ends
// when it is lost. It is safe for concurrent use and holds no goroutine of
// its own: the Locker's Close releases its holds.
//
// The design choices, against the known failures of read-write locks:
//   - Writers go first: a writer that waits marks itself in the backend,
//     and while a waiting writer's mark lives no new reader is let in, so a
//     steady stream of readers keeps a writer out no longer than the
//     readers it found hold. The mark has the writer's lease and is renewed
//     by its attempts: a waiting writer that died stops blocking readers
//     within one lease. The other side of this choice: writers that keep
//     coming keep readers out (the backend keeps no queue of readers to let
//     in between two writes, as sync.RWMutex does); it suits locks written
//     rarely and read often.
//   - Each reader has its own lease, renewed only by the Locker that holds
//     it: a dead process's read hold ends with its lease.
//   - The writer's token strictly increases per RWMutex (a fence refuses a
//     writer whose lease ran out); a reader's token is the last write's,
//     what it reads after (0 when none was granted, or every trace of the
//     lock expired).
//   - Downgrade (write to read) is one step; upgrade is refused at once
//     (ErrUpgrade). Holds are not reentrant: a second RLock through a read
//     hold's context would wait behind a waiting writer that waits for the
//     first, so it is refused at once (ErrInvalid), as a nested Lock is.
//
// The same wait across goroutines is the caller's to avoid, as with
// sync.RWMutex: a reader that waits, holding its read, for another
// goroutine's RLock of the same lock waits forever behind a waiting writer
// that waits for it (until a context ends).
//
// Goroutines of one Locker wait in one FIFO queue per RWMutex, readers and
// writers together, and only its head asks the backend. Tokens are the
// RWMutex's own sequence, not those of the lock or the semaphore of the
// same name.
type RWMutex struct {
	holdTarget
}

// rwHeldKey finds, in a hold's context, the hold of the RWMutex of key.
type rwHeldKey struct {
	l   *Locker
	key string
}

// RWMutex returns the read-write lock of name. Options are those of Lock:
// WithTTL (each hold's lease, and a waiting writer's mark's),
// WithAutoRenew, WithRetry; WithOwner and WithReplicaAck are refused
// (ErrInvalid): a hold's holder is random per acquisition.
//
// It sends nothing. A backend without read-write locks (Redlock, the etcd
// module's, an outside backend without backend.RWLocker) returns an error
// matching errors.ErrUnsupported; a bad name or option one matching
// ErrInvalid.
func (l *Locker) RWMutex(name string, opts ...LockOption) (*RWMutex, error) {
	if err := l.check(context.Background(), name); err != nil {
		return nil, err
	}
	if l.drv.rw == nil {
		return nil, errRWUnsupported
	}
	lc := newLockConfig(opts)
	switch {
	case lc.err != nil:
		return nil, lc.err
	case lc.owner != "":
		return nil, invalid("WithOwner does not apply to a read-write lock: a hold's holder is random per acquisition")
	case lc.replicas > 0:
		return nil, invalid("WithReplicaAck does not apply to a read-write lock")
	}
	return &RWMutex{holdTarget{l: l, name: name, key: l.name(name), qkey: rwQueueKey(name), lc: lc}}, nil
}

// rwQueueKey is the key of a read-write lock's queue among the Locker's
// local queues, apart from the locks' and the semaphores' (semQueueKey).
func rwQueueKey(name string) string { return "\x00rwmutex\x00" + name }

var errRWUnsupported = fmt.Errorf("%w: this Locker's backend keeps no read-write locks (Redlock, etcd, or a backend without backend.RWLocker)", errors.ErrUnsupported)

// Name returns the lock's name.
func (rw *RWMutex) Name() string { return rw.name }

// RLock takes a read hold, waiting until no writer holds or waits, or ctx
// ends. Its errors are those of Semaphore.Acquire; ErrInvalid at once when
// ctx carries a hold of this RWMutex (holds are not reentrant).
func (rw *RWMutex) RLock(ctx context.Context) (*RWHold, error) {
	return rw.acquire(ctx, "redfence.RWMutex.RLock", false, true)
}

// TryRLock makes one attempt at a read hold: ErrNotAcquired when a writer
// holds or waits (or goroutines of this Locker wait: they were first).
func (rw *RWMutex) TryRLock(ctx context.Context) (*RWHold, error) {
	return rw.acquire(ctx, "redfence.RWMutex.TryRLock", false, false)
}

// Lock takes the write hold, waiting until no one holds or ctx ends; while
// it waits, no new reader is let in. Its errors are those of
// Semaphore.Acquire; ErrUpgrade at once when ctx carries a read hold of
// this RWMutex, ErrInvalid when it carries the write hold.
func (rw *RWMutex) Lock(ctx context.Context) (*RWHold, error) {
	return rw.acquire(ctx, "redfence.RWMutex.Lock", true, true)
}

// TryLock makes one attempt at the write hold, and leaves no mark when
// refused: readers are not held back by a writer that does not wait.
func (rw *RWMutex) TryLock(ctx context.Context) (*RWHold, error) {
	return rw.acquire(ctx, "redfence.RWMutex.TryLock", true, false)
}

func (rw *RWMutex) acquire(ctx context.Context, spanName string, write, wait bool) (*RWHold, error) {
	if err := rw.usable(ctx); err != nil {
		return nil, err
	}
	if rw.l.held.Load() > 0 {
		// A hold unlocked or lost is nothing to upgrade or re-enter.
		if lk, _ := ctx.Value(rwHeldKey{rw.l, rw.name}).(*Lock); lk != nil && lk.usable(ctx) == nil {
			if write && !lk.kind.(*rwHold).write.Load() {
				return nil, ErrUpgrade
			}
			return nil, invalid("ctx carries a hold of read-write lock %q: holds are not reentrant", rw.name)
		}
	}
	lk, err := acquireHold(ctx, rwSide{rw, write}, spanName, wait)
	if lk == nil {
		return nil, err
	}
	return &RWHold{lk: lk}, err
}

func (rw *RWMutex) usable(ctx context.Context) error {
	switch {
	case rw == nil || rw.l == nil:
		return invalid("nil RWMutex")
	case ctx == nil:
		return invalid("nil context")
	}
	select {
	case <-rw.l.done:
		return ErrClosed
	default:
		return nil
	}
}

// RWState is a read-write lock as the backend sees it (RWMutex.State).
type RWState struct {
	Writer  *PermitHolder  // nil when no write is held
	Readers []PermitHolder // by the end of their lease; Token is the last write's
	Waiting int            // writers waiting (live marks)
	// LastWrite is the token of the last write granted (0 when none, or
	// every trace of the lock expired).
	LastWrite int64
}

// State returns the lock's live holds: what `redfence inspect` shows. It
// makes one round trip.
func (rw *RWMutex) State(ctx context.Context) (RWState, error) {
	if err := rw.usable(ctx); err != nil {
		return RWState{}, err
	}
	st, err := rw.l.drv.rw.InspectRW(ctx, rw.key)
	if err != nil {
		return RWState{}, unavailable(err)
	}
	holder := func(h backend.RWHolder) PermitHolder {
		info, _ := parseOwner(h.Owner)
		return PermitHolder{Owner: h.Owner, OwnerInfo: info, Token: h.Token, Lease: h.Left}
	}
	out := RWState{Waiting: st.Waiting, LastWrite: st.LastWrite}
	if st.Writer != nil {
		w := holder(*st.Writer)
		out.Writer = &w
	}
	for _, h := range st.Readers {
		out.Readers = append(out.Readers, holder(h))
	}
	return out, nil
}

// rwSide is one side of an RWMutex, a holdSource: reads or the write.
type rwSide struct {
	rw    *RWMutex
	write bool
}

func (s rwSide) target() *holdTarget { return &s.rw.holdTarget }
func (s rwSide) marks() bool         { return s.write }
func (s rwSide) kind() holdKind {
	h := &rwHold{rw: s.rw}
	h.write.Store(s.write)
	return h
}

func (s rwSide) leastToken() int64 {
	if s.write {
		return 1
	}
	return 0 // a read before any write
}

func (s rwSide) attempt(ctx context.Context, owner string, queue bool) (backend.Grant, error) {
	return s.rw.l.drv.rw.AcquireRW(ctx, backend.RWAttempt{Key: s.rw.key, Owner: owner, TTL: s.rw.lc.ttl, Write: s.write, Queue: queue})
}

func (s rwSide) watch() (<-chan struct{}, func()) {
	rw := s.rw
	ready, stop := rw.l.drv.rw.WatchRW(rw.key, func() { rw.l.wakeLocal(rw.qkey) })
	if stop == nil {
		stop = func() {}
	}
	return ready, stop
}
