package mutex

import (
	"context"

	"github.com/redfence/redfence/mutex/backend"
)

// Acquire takes a permit, waiting until one is free or ctx ends, as Lock
// waits (arrival order, woken by releases and raised limits, a poll bounded
// by the shortest lease left). When ctx ends first, returns
// errors.Join(ErrNotAcquired, ctx.Err()), with ErrUnavailable when the last
// attempt failed on the store; ErrClosed once the Locker closed.
func (s *Semaphore) Acquire(ctx context.Context) (*Permit, error) {
	return s.acquire(ctx, "redfence.Semaphore.Acquire", true)
}

// TryAcquire makes one attempt: the permit, ErrNotAcquired when every
// permit is held (or goroutines of this Locker wait for one: they were
// first), or an error matching ErrUnavailable that wraps the server's.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Permit, error) {
	return s.acquire(ctx, "redfence.Semaphore.TryAcquire", false)
}

func (s *Semaphore) acquire(ctx context.Context, spanName string, wait bool) (*Permit, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	lk, err := acquireHold(ctx, s, spanName, wait)
	if lk == nil {
		return nil, err
	}
	return &Permit{lk: lk}, err
}

// The Semaphore is its own holdSource and holdKind.

func (s *Semaphore) target() *holdTarget { return &s.holdTarget }
func (s *Semaphore) leastToken() int64   { return 1 }
func (s *Semaphore) kind() holdKind      { return s }
func (s *Semaphore) marks() bool         { return false }
func (s *Semaphore) family() holdFamily  { return familyPermit }
func (s *Semaphore) queueKey() string    { return s.qkey }

func (s *Semaphore) attempt(ctx context.Context, owner string, _ bool) (backend.Grant, error) {
	return s.l.drv.sem.AcquirePermit(ctx, backend.PermitAttempt{Key: s.key, Owner: owner, TTL: s.lc.ttl, Limit: int(s.limit.Load())})
}

func (s *Semaphore) releaseHold(ctx context.Context, ls backend.Lease) (bool, error) {
	return s.l.drv.sem.ReleasePermit(ctx, ls)
}

func (s *Semaphore) extendHolds(ctx context.Context, ls []backend.Lease) ([]backend.Renewal, error) {
	return s.l.drv.sem.ExtendPermits(ctx, ls)
}
