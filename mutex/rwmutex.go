package mutex

import (
	"context"
	"errors"
	"fmt"

	"github.com/redfence/redfence/mutex/backend"
)

// ErrUpgrade: RWMutex.Lock or TryLock through a context holding a read of
// the same RWMutex, which would wait for itself. Release it, or Downgrade.
var ErrUpgrade = errors.New("mutex: read-write lock: a reader cannot upgrade to writing")

// RWMutex is a read-write lock on one key across every Locker of the
// backend (NewRWMutex): many readers or one writer, each hold with its own
// lease renewed by its own Locker only. Writers go first: a waiting
// writer's mark keeps new readers out, so readers that keep coming cannot
// starve it (and writers that keep coming keep readers out). The write's
// token rises per RWMutex; a read's is the last write's. Downgrade is one
// step; upgrade is refused at once (ErrUpgrade); holds are not reentrant.
// A reader that waits, holding its read, for another goroutine's RLock of
// the same lock waits behind a waiting writer, as with sync.RWMutex.
// docs/locking.md has the design. It is safe for concurrent use.
type RWMutex struct {
	holdTarget
}

// rwHeldKey finds, in a hold's context, the hold of the RWMutex of key.
type rwHeldKey struct {
	l   *Locker
	key string
}

// NewRWMutex returns l's read-write lock of key. Options are Lock's WithTTL
// (each hold's lease, and a waiting writer's mark's), WithAutoRenew and
// WithRetry; WithOwner and WithReplicaAck are refused. It sends nothing. A
// backend without backend.RWLocker returns an error matching
// errors.ErrUnsupported; a bad key or option one matching ErrInvalid.
func NewRWMutex(l *Locker, name string, opts ...LockOption) (*RWMutex, error) {
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
	return &RWMutex{holdTarget{l: l, name: name, key: name, qkey: rwQueueKey(name), lc: lc}}, nil
}

// rwQueueKey is the key of a read-write lock's queue among the Locker's
// local queues, apart from the locks' and the semaphores' (semQueueKey).
func rwQueueKey(name string) string { return "\x00rwmutex\x00" + name }

var errRWUnsupported = fmt.Errorf("%w: this Locker's backend keeps no read-write locks (Redlock, etcd, or a backend without backend.RWLocker)", errors.ErrUnsupported)

// Key returns the lock's key.
func (rw *RWMutex) Key() string { return rw.name }

// RLock takes a read hold, waiting until no writer holds or waits, or ctx
// ends; errors as Semaphore.Acquire's, and ErrInvalid at once when ctx
// carries a hold of this RWMutex.
func (rw *RWMutex) RLock(ctx context.Context) (*RWHold, error) {
	return rw.acquire(ctx, "redfence.RWMutex.RLock", false, true)
}

// TryRLock makes one attempt at a read hold: ErrNotAcquired when a writer
// holds or waits (or goroutines of this Locker wait: they were first).
func (rw *RWMutex) TryRLock(ctx context.Context) (*RWHold, error) {
	return rw.acquire(ctx, "redfence.RWMutex.TryRLock", false, false)
}

// Lock takes the write hold, waiting until no one holds or ctx ends, no
// new reader let in meanwhile; errors as Semaphore.Acquire's, and
// ErrUpgrade (a read hold in ctx) or ErrInvalid (the write hold) at once.
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

// watch is Semaphore.watch for the read-write lock's holds.
func (s rwSide) watch() (<-chan struct{}, func()) {
	rw := s.rw
	return rw.l.drv.rw.WatchRW(rw.key, func() { rw.l.wakeLocal(rw.qkey) })
}
