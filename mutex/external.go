package mutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
)

// NewWithBackend returns a Locker whose locks are held by b, a backend
// outside this package (package backend states its contract). The Locker
// brings what it brings to Redis: the per-key queue (an Unlock hands the
// lock to the next waiter of this Locker when b implements
// backend.HandOffer, and otherwise releases and wakes it), reentrancy, the
// lease deadline with the clock drift (WithClockDrift), renewal and the
// loss signal, telemetry. Keys reach b with the prefix (WithPrefix) on
// them. Waiters are woken by b when it implements backend.Watcher, and
// poll otherwise. Inspect, List and ForceRelease work when b implements
// backend.Inspector, and return an error matching errors.ErrUnsupported
// otherwise.
//
// The Locker does not close b: like a go-redis client given to New, b is
// the caller's, and must stay usable until the Locker's Close and every
// call of the Locker returned. Client returns the client b lends when it
// implements ClientHolder, nil otherwise: then the adapters that keep data
// next to their locks (httplock, runner) refuse such a Locker.
// WithReplicaAck does not apply. A nil b makes every call return an error
// wrapping ErrInvalid.
func NewWithBackend(b backend.Backend, opts ...Option) *Locker {
	l := newLocker(opts)
	if b == nil || isNilPointer(b) {
		l.err = invalid("nil backend")
	}
	l.ctxAware = true // the contract: every call returns by its ctx's deadline
	ext := external{l: l, b: b}
	ext.w, _ = b.(backend.Watcher)
	ext.ho, _ = b.(backend.HandOffer)
	if ch, ok := b.(ClientHolder); ok && !isNilPointer(b) {
		if c := ch.Client(); c != nil && !isNilPointer(c) {
			ext.c = c
		}
	}
	l.insp, _ = b.(backend.Inspector)
	l.be = ext
	return l
}

// external puts a backend.Backend behind the Locker's store seam.
type external struct {
	l  *Locker
	b  backend.Backend
	w  backend.Watcher       // nil: the poll alone
	ho backend.HandOffer     // nil: an Unlock releases and wakes the next waiter
	c  redis.UniversalClient // a ClientHolder's client, nil without
}

func (e external) name(key string) string { return e.l.cfg.prefix + key }

func (e external) acquire(ctx context.Context, _, lockKey, owner string, lc *lockConfig, _ bool, sent time.Time) (acquireResult, error) {
	g, err := e.b.Acquire(ctx, backend.Attempt{Key: lockKey, Owner: owner, TTL: lc.ttl})
	var res acquireResult
	if err == nil {
		res, err = grantResult(g)
	}
	if err == nil && res.status == 1 {
		err = e.l.lateGrant(sent, lc.ttl)
	}
	if err != nil && lc.owner == "" {
		e.abandon(lockKey, owner)
	}
	return res, err
}

// grantResult checks what a backend answered: a grant without a token
// would break every fence downstream.
func grantResult(g backend.Grant) (acquireResult, error) {
	switch g.Status {
	case backend.Held:
		return acquireResult{status: 0, remaining: g.Remaining}, nil
	case backend.Acquired, backend.Reentered:
		if g.Token <= 0 {
			return acquireResult{}, fmt.Errorf("mutex: the backend granted token %d; tokens are positive", g.Token)
		}
		return acquireResult{status: int64(g.Status), token: g.Token, handle: g.Handle}, nil
	}
	return acquireResult{}, fmt.Errorf("mutex: the backend answered status %d", g.Status)
}

func (e external) abandon(lockKey, owner string) {
	e.l.afterward(nil, func(ctx context.Context) { _ = e.b.Abandon(ctx, lockKey, owner) })
}

func lease(lk *Lock) backend.Lease {
	return backend.Lease{Key: lk.lockKey, Owner: lk.owner, Token: lk.token, Handle: lk.handle}
}

func (e external) release(ctx context.Context, lk *Lock) (int64, <-chan error, error) {
	n, err := e.b.Release(ctx, lease(lk))
	return n, nil, err
}

func (e external) releaseAgain(ctx context.Context, lk *Lock) error {
	_, err := e.b.Release(ctx, lease(lk))
	return err
}

func (e external) extend(ctx context.Context, locks []*Lock, ttls []time.Duration) ([]renewOutcome, time.Time, error) {
	leases := make([]backend.Lease, len(locks))
	for i, lk := range locks {
		leases[i] = lease(lk)
		leases[i].TTL = ttls[i]
	}
	sent := e.l.now()
	got, err := e.b.Extend(ctx, leases)
	out := make([]renewOutcome, len(locks)) // renewUnknown
	if len(got) != len(locks) {
		if err == nil {
			err = fmt.Errorf("mutex: the backend renewed %d leases of %d", len(got), len(locks))
		}
		return out, sent, err
	}
	for i, r := range got {
		switch r {
		case backend.Renewed:
			out[i] = renewHeld
		case backend.Gone:
			out[i] = renewGone
		}
	}
	return out, sent, err
}

func (e external) ttl(ctx context.Context, lk *Lock) (time.Duration, error) {
	return e.b.TTL(ctx, lease(lk))
}

func (e external) releaseAll(locks []*Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var errs []error
	for _, lk := range locks {
		if _, err := e.b.Release(ctx, lease(lk)); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// watch: a backend.Watcher's wake-ups are established when Watch returns.
func (e external) watch(key, lockKey string) (<-chan struct{}, func()) {
	if e.w == nil {
		return nil, func() {}
	}
	stop := e.w.Watch(lockKey, func() { e.l.wakeLocal(key) })
	if stop == nil {
		stop = func() {}
	}
	return closedChan, stop
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (e external) targets(string) []target                     { return nil }
func (e external) client() redis.UniversalClient               { return e.c }
func (e external) servers() []redis.UniversalClient            { return nil }
func (e external) releaseKeys(lockKey string) ([2]string, int) { return [2]string{lockKey}, 1 }
func (e external) handOff() bool                               { return e.ho != nil }

// handOffTo asks the backend's HandOffer; its grant is checked as an
// attempt's is.
func (e external) handOffTo(ctx context.Context, lk *Lock, owner string, ttl time.Duration) (int64, int64, any, <-chan error, error) {
	left, g, err := e.ho.HandOff(ctx, lease(lk), backend.Attempt{Key: lk.lockKey, Owner: owner, TTL: ttl})
	if err != nil || left != 0 {
		return left, 0, nil, nil, err
	}
	res, err := grantResult(g)
	if err == nil && res.status != 1 {
		err = fmt.Errorf("mutex: the backend handed off with status %d", g.Status)
	}
	if err != nil {
		return 0, 0, nil, nil, err
	}
	return 0, res.token, res.handle, nil, nil
}

func (e external) releaseHandedOff(lockKey, owner string, token int64, handle any) {
	l := backend.Lease{Key: lockKey, Owner: owner, Token: token, Handle: handle}
	e.l.afterward(nil, func(ctx context.Context) { _, _ = e.b.Release(ctx, l) })
}
func (e external) replicaAck() bool { return false }
