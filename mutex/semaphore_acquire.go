package mutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex/backend"
)

// Acquire takes a permit, waiting until one is free or ctx ends. Goroutines
// of this Locker wait in arrival order and only the first asks the
// backend; it is woken by a release (here, or elsewhere through the
// backend's notification) or a raised limit, and polls, with WithRetry's
// backoff bounded by the shortest lease left among the holders, for
// notifications lost and holders that died.
//
// When ctx ends first, returns errors.Join(ErrNotAcquired, ctx.Err()) and,
// when the last attempt failed on the server, an error matching
// ErrUnavailable that wraps the server's; ErrClosed once the Locker
// closed. Whatever an attempt cut short may have taken is given back on a
// context of its own.
func (s *Semaphore) Acquire(ctx context.Context) (*Permit, error) {
	return s.acquire(ctx, "redfence.Semaphore.Acquire", true)
}

// TryAcquire makes one attempt: the permit, ErrNotAcquired when every
// permit is held (or goroutines of this Locker wait for one: they were
// first), or an error matching ErrUnavailable that wraps the server's.
func (s *Semaphore) TryAcquire(ctx context.Context) (*Permit, error) {
	return s.acquire(ctx, "redfence.Semaphore.TryAcquire", false)
}

// permitCall is one Acquire or TryAcquire: queued behind this Locker's
// earlier calls, then (the head) trying the backend and parking between
// attempts until a permit is granted or the call gives up.
type permitCall struct {
	s          *Semaphore
	caller     context.Context // the permit's context carries its values
	ctx        context.Context // caller's, with the call's span
	span       trace.Span
	wait       bool
	w          *waiter
	bo         backoff
	remaining  time.Duration // the shortest lease left among the holders, as last seen
	lastErr    error         // the last attempt's server error, until one is answered
	subscribed bool
}

func (s *Semaphore) acquire(ctx context.Context, spanName string, wait bool) (*Permit, error) {
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	l := s.l
	c := &permitCall{s: s, caller: ctx, wait: wait, bo: backoff{min: s.lc.retryMin, max: s.lc.retryMax}}
	c.ctx, c.span = l.tel.startSpan(ctx, spanName, s.name, 0)
	if err := c.ctx.Err(); err != nil {
		return c.end(nil, errors.Join(ErrNotAcquired, err))
	}
	w, err := l.enqueue(s.qkey, wait, "", nil) // nil: never handed a lock
	if err != nil {
		return c.end(nil, err)
	}
	c.w = w
	// Not "acquired": the next head tries at once, as another permit may
	// be free, where a lock's next waiter waits for a release.
	defer l.dequeue(s.qkey, w, false)
	if stop := c.waitFor(w.turn, nil); stop != nil {
		return c.end(nil, stop)
	}
	for {
		p, ended, err := c.try()
		if ended {
			return c.end(p, err)
		}
		if !c.subscribed {
			c.subscribed = true
			if l.subscribeWith(c.ctx, s.qkey, s.watch) {
				continue // a release before the subscription was confirmed is not missed
			}
		}
		d := c.bo.next()
		if c.remaining > 0 && d > c.remaining+time.Millisecond {
			d = c.remaining + time.Millisecond
		}
		t := time.NewTimer(d)
		stop := c.waitFor(w.wake, t.C)
		t.Stop()
		if stop != nil {
			return c.end(nil, stop)
		}
	}
}

// try makes one attempt; ended says whether the call ends with p or err,
// or goes on to wait.
func (c *permitCall) try() (p *Permit, ended bool, err error) {
	s, l := c.s, c.s.l
	owner := l.newOwner() // fresh per attempt: a clean-up frees only its own
	sent := l.now()
	g, err := l.drv.sem.AcquirePermit(c.ctx, backend.PermitAttempt{Key: s.key, Owner: owner, TTL: s.lc.ttl, Limit: int(s.limit.Load())})
	if err == nil {
		err = checkPermit(g)
	}
	if err == nil && g.Status == backend.Acquired {
		err = l.lateGrant(sent, s.lc.ttl)
	}
	if err != nil {
		if !errors.Is(err, backend.ErrGivenBack) && !errors.Is(err, ErrInvalid) {
			s.giveBack(owner)
		}
		return c.failed(err)
	}
	if g.Status == backend.Held {
		l.tel.contention.Add(context.Background(), 1)
		c.remaining, c.lastErr = g.Remaining, nil
		if !c.wait {
			return nil, true, ErrNotAcquired
		}
		return nil, false, nil
	}
	lk := newLock(c.caller, l, s.name, s.key, owner, g.Token, &s.lc, sent)
	lk.sem = s
	if err := l.renew.add(lk); err != nil { // Close came first
		lk.finish(ErrReleased, "")
		s.giveBack(owner)
		return nil, true, err
	}
	return &Permit{lk: lk}, true, nil
}

// checkPermit refuses what a backend may not answer: a grant without a
// token would break every fence downstream.
func checkPermit(g backend.Grant) error {
	switch {
	case g.Status == backend.Held:
		return nil
	case g.Status != backend.Acquired:
		return fmt.Errorf("mutex: the backend answered a permit attempt with status %d", g.Status)
	case g.Token <= 0:
		return fmt.Errorf("mutex: the backend granted token %d; tokens are positive", g.Token)
	}
	return nil
}

// failed handles an attempt that failed on the way to or on the server.
func (c *permitCall) failed(err error) (*Permit, bool, error) {
	switch {
	case errors.Is(err, ErrInvalid): // no retry helps
		return nil, true, err
	case c.ctx.Err() != nil:
		if !errors.Is(err, c.ctx.Err()) {
			c.lastErr = unavailable(err)
		}
		return nil, true, errors.Join(ErrNotAcquired, c.ctx.Err(), c.lastErr)
	}
	err = unavailable(err)
	c.s.l.tel.attemptFailed(c.span, err)
	if !c.wait {
		return nil, true, err
	}
	c.lastErr, c.remaining = err, 0
	return nil, false, nil
}

// waitFor is the one place a call blocks: for its turn, or a wake-up or
// the poll. It returns why the call must stop: ErrClosed, or ErrNotAcquired
// with the ctx's error.
func (c *permitCall) waitFor(ch <-chan struct{}, poll <-chan time.Time) error {
	select {
	case <-ch:
	case <-poll:
	case <-c.ctx.Done():
		return errors.Join(ErrNotAcquired, c.ctx.Err(), c.lastErr)
	case <-c.s.l.done:
		return ErrClosed
	}
	return nil
}

// end records the call's outcome on its span, and returns.
func (c *permitCall) end(p *Permit, err error) (*Permit, error) {
	outcome := "acquired"
	switch {
	case errors.Is(err, ErrClosed):
		outcome = "closed"
	case errors.Is(err, ErrNotAcquired) && c.wait:
		outcome = "timeout"
	case errors.Is(err, ErrNotAcquired):
		outcome = "contended"
	case err != nil:
		outcome = "error"
	}
	if p != nil && c.span.IsRecording() {
		c.span.SetAttributes(attrToken.Int64(p.Token()))
	}
	endSpan(c.span, outcome, err)
	return p, err
}

// giveBack frees, in the background, the permit owner (a random id) may
// hold: an attempt whose outcome is unknown, or whose grant was refused.
func (s *Semaphore) giveBack(owner string) {
	s.l.afterward(func(ctx context.Context) {
		_, _ = s.l.drv.sem.ReleasePermit(ctx, backend.Lease{Key: s.key, Owner: owner})
	})
}
