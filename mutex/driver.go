package mutex

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/redfence/redfence/mutex/backend"
)

// driver is the Locker's backend with its capabilities, each asked once
// when the Locker is built (as database/sql asks its driver's conns): a nil
// one is absent, and the Locker does without it.
type driver struct {
	b   backend.Backend
	w   backend.Watcher      // nil: waiters poll
	ho  backend.HandOffer    // nil: a Release releases and wakes the next waiter
	q   backend.Queuer       // nil: no queue of Lockers in the backend
	ra  backend.ReplicaAcker // nil: WithReplicaAck is refused
	br  backend.BulkReleaser // nil: Close releases one lock at a time
	in  backend.Inspector    // nil: Inspect, List, ForceRelease unsupported
	ba  backend.Batcher      // nil: LockAll takes every key on its own
	sem backend.Semaphorer   // nil: Semaphore is refused (errors.ErrUnsupported)
	rw  backend.RWLocker     // nil: RWMutex is refused (errors.ErrUnsupported)
	own io.Closer            // b, when it is one: Close closes it
}

func newDriver(b backend.Backend) driver {
	d := driver{b: b}
	d.w, _ = b.(backend.Watcher)
	if cw, ok := b.(backend.ConditionalWatcher); ok && !cw.Watching() {
		d.w = nil
	}
	d.ho, _ = b.(backend.HandOffer)
	d.q, _ = b.(backend.Queuer)
	d.ra, _ = b.(backend.ReplicaAcker)
	d.br, _ = b.(backend.BulkReleaser)
	d.in, _ = b.(backend.Inspector)
	d.ba, _ = b.(backend.Batcher)
	d.sem, _ = b.(backend.Semaphorer)
	d.rw, _ = b.(backend.RWLocker)
	d.own, _ = b.(io.Closer)
	return d
}

// New returns a Locker whose locks are held by b, the backend a driver
// package built (redisdriver.New, redlockdriver.New, etcddriver.New), as
// database/sql's OpenDB takes a driver's Connector. The Locker brings the
// per-key queue, reentrancy, the lease deadline, renewal, the loss signal
// and telemetry; b's optional capabilities (package backend) are detected
// here, once. The Locker owns b: Close closes it when it is an io.Closer
// (a driver's store client stays the caller's). A nil b or a bad option
// returns an error matching ErrInvalid; nothing is sent.
func New(b backend.Backend, opts ...Option) (*Locker, error) {
	if b == nil || isNilPointer(b) {
		return nil, invalid("nil backend")
	}
	l, err := newLocker(opts)
	if err != nil {
		return nil, err
	}
	l.drv = newDriver(b)
	return l, nil
}

// Backend returns the backend given to New (nil for a nil Locker), so that
// adapters can ask for capabilities beyond locking (backend.SlotClaimer,
// backend.TermJournal, redisdriver.ClientHolder), as database/sql's
// DB.Driver does. Its lock methods bypass the Locker's queue and renewal.
func (l *Locker) Backend() backend.Backend {
	if l == nil {
		return nil
	}
	return l.drv.b
}

// attempt makes one attempt for a, sent at sent; waiting says the call
// waits when the key is held (Attempt.Waiter). A failed attempt of a random
// owner is abandoned (the backend orders that after the call), a grant
// that arrived after its lease refused and freed.
func (l *Locker) attempt(a *acquisition, waiting bool, sent time.Time) (acquireResult, error) {
	at := backend.Attempt{Key: a.lockKey, Owner: a.owner, TTL: a.lc.ttl, Drift: l.drift(a.lc.ttl), Shared: !a.randomOwner}
	if waiting {
		at.Waiter = l.id
		at.InQueue = l.drv.q != nil && l.inBackendQueue(a.key)
	}
	g, err := l.drv.b.Acquire(a.ctx, at)
	var res acquireResult
	if err == nil {
		res, err = grantResult(g)
	}
	if err == nil && res.status == 1 {
		err = l.lateGrant(sent, a.lc.ttl)
	}
	if err != nil {
		if a.randomOwner && !errors.Is(err, backend.ErrGivenBack) && !errors.Is(err, ErrInvalid) {
			l.abandon(a.lockKey, a.owner)
		}
		return res, err
	}
	if at.Waiter != "" && l.drv.q != nil {
		l.setInBackendQueue(a.key, res.status == 0)
	}
	return res, nil
}

type acquireResult struct {
	status    int64 // 0 held by another, 1 acquired, 2 re-entered
	token     int64
	remaining time.Duration // holder's remaining lease when status is 0
	why       error         // status 0: the backend's detail (Redlock: a *QuorumError)
	handle    any           // the backend's own state of the lock granted (Lock.handle)
}

// grantResult checks what a backend answered: a grant without a token
// would break every fence downstream.
func grantResult(g backend.Grant) (acquireResult, error) {
	switch g.Status {
	case backend.Held:
		return acquireResult{status: 0, remaining: g.Remaining, why: g.Detail}, nil
	case backend.Acquired, backend.Reentered:
		if g.Token <= 0 {
			return acquireResult{}, fmt.Errorf("mutex: the backend granted token %d; tokens are positive", g.Token)
		}
		return acquireResult{status: int64(g.Status), token: g.Token, handle: g.Handle}, nil
	}
	return acquireResult{}, fmt.Errorf("mutex: the backend answered status %d", g.Status)
}

// lateGrant refuses a grant whose lease, sent at sent, ran out (drift
// included) before it arrived: a failed attempt, freed by the caller,
// never handed out already lost.
func (l *Locker) lateGrant(sent time.Time, ttl time.Duration) error {
	if now := l.now(); !now.Before(sent.Add(ttl - l.drift(ttl))) {
		return fmt.Errorf("the reply took %v, longer than the lease of %v allows", now.Sub(sent), ttl)
	}
	return nil
}

// abandon frees, in the background, what owner (a random id) may hold of
// lockKey.
func (l *Locker) abandon(lockKey, owner string) {
	l.afterward(func(ctx context.Context) { _ = l.drv.b.Abandon(ctx, lockKey, owner) })
}

// lease names lk to its backend, with its current TTL; never under lk.mu.
func lease(lk *Lock) backend.Lease {
	ttl := lk.leaseTTL()
	return backend.Lease{Key: lk.lockKey, Owner: lk.owner, Token: lk.token, TTL: ttl, Drift: lk.l.drift(ttl), Handle: lk.handle}
}

// release takes one count of lk: the counts left (0: freed), or -1 when it
// was not held.
func (l *Locker) release(ctx context.Context, lk *Lock) (int64, error) {
	return l.drv.b.Release(ctx, lease(lk))
}

// extend sets the lease of each lock to its ttl, from sent, taken before
// the call: the new deadlines run from it.
func (l *Locker) extend(ctx context.Context, locks []*Lock, ttls []time.Duration) (out []backend.Renewal, sent time.Time, err error) {
	leases := make([]backend.Lease, len(locks))
	for i, lk := range locks {
		leases[i] = lease(lk)
		leases[i].TTL, leases[i].Drift = ttls[i], l.drift(ttls[i])
	}
	sent = l.now()
	got, err := l.extendLeases(ctx, locks, leases)
	if len(got) != len(locks) {
		if err == nil {
			err = fmt.Errorf("mutex: the backend renewed %d leases of %d", len(got), len(locks))
		}
		return make([]backend.Renewal, len(locks)), sent, err // all Unknown
	}
	return got, sent, err
}

// releaseAll releases the locks Close found held: one step for a
// BulkReleaser, which bounds its own time; otherwise one at a time, all
// within cleanupTimeout.
func (l *Locker) releaseAll(locks []*Lock) error {
	var leases []backend.Lease
	var holds []*Lock
	for _, lk := range locks {
		if lk.kind != nil {
			holds = append(holds, lk)
		} else {
			leases = append(leases, lease(lk))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	for _, lk := range holds {
		if _, err := lk.kind.releaseHold(ctx, lease(lk)); err != nil {
			errs = append(errs, err)
		}
	}
	if l.drv.br != nil && len(leases) > 0 {
		return errors.Join(append(errs, l.drv.br.ReleaseAll(context.Background(), leases))...)
	}
	for _, ls := range leases {
		if _, err := l.drv.b.Release(ctx, ls); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// extendLeases sends the leases of locks to Extend, and those of permits and
// read-write holds to their own calls (holdKind.extendHolds): one call per
// family, in order.
func (l *Locker) extendLeases(ctx context.Context, locks []*Lock, leases []backend.Lease) ([]backend.Renewal, error) {
	var parts [familyRW + 1][]int
	for i, lk := range locks {
		f := familyOf(lk)
		parts[f] = append(parts[f], i)
	}
	if len(parts[familyLock]) == len(locks) {
		return l.drv.b.Extend(ctx, leases)
	}
	out := make([]backend.Renewal, len(locks)) // Unknown
	var errs []error
	for _, part := range parts {
		if len(part) == 0 {
			continue
		}
		sub := make([]backend.Lease, len(part))
		for j, i := range part {
			sub[j] = leases[i]
		}
		got, err := l.extendOf(locks[part[0]])(ctx, sub)
		errs = append(errs, err)
		for j, i := range part {
			if j < len(got) && len(got) == len(part) {
				out[i] = got[j]
			}
		}
	}
	return out, errors.Join(errs...)
}

// handOffTo takes one count of lk and, when that frees it, grants it to
// owner for ttl in the same step: the counts left (0: handed off, with the
// grant's token and handle), or -1 when lk did not hold it.
func (l *Locker) handOffTo(ctx context.Context, lk *Lock, owner string, ttl time.Duration) (left, token int64, handle any, err error) {
	left, g, err := l.drv.ho.HandOff(ctx, lease(lk), backend.Attempt{Key: lk.lockKey, Owner: owner, TTL: ttl, Drift: l.drift(ttl)})
	if err != nil || left != 0 {
		return left, 0, nil, err
	}
	res, err := grantResult(g)
	if err == nil && res.status != 1 {
		err = fmt.Errorf("mutex: the backend handed off with status %d", g.Status)
	}
	if err != nil {
		return 0, 0, nil, err
	}
	return 0, res.token, res.handle, nil
}

// releaseHandedOff releases, in the background, a lock handed over to
// owner (token, handle) whose call gave up meanwhile.
func (l *Locker) releaseHandedOff(lockKey, owner string, token int64, handle any) {
	ls := backend.Lease{Key: lockKey, Owner: owner, Token: token, Handle: handle}
	l.afterward(func(ctx context.Context) { _, _ = l.drv.b.Release(ctx, ls) })
}

// watch asks for key's release notifications, which wake key's head
// waiter, until stop; ready is closed once they are established (nil:
// nothing to wait for).
func (l *Locker) watch(key, lockKey string) (ready <-chan struct{}, stop func()) {
	if l.drv.w == nil {
		return nil, func() {}
	}
	ready, stop = l.drv.w.Watch(lockKey, func() { l.wakeLocal(key) })
	if stop == nil {
		stop = func() {}
	}
	return ready, stop
}
