package mutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex/backend"
)

// holdTarget is what a semaphore and a read-write lock share: the name a
// hold is taken on, its local queue, and the options of its holds.
type holdTarget struct {
	l    *Locker
	name string
	key  string // the backend's: the prefix on name
	qkey string // the local queue's
	lc   lockConfig
}

// holdSource is one way to take a hold of a target: a Semaphore's permit, a
// read or the write of an RWMutex.
type holdSource interface {
	target() *holdTarget
	// attempt asks the backend once, for owner; queue says the caller waits
	// when refused.
	attempt(ctx context.Context, owner string, queue bool) (backend.Grant, error)
	// leastToken is the least token a grant may carry.
	leastToken() int64
	// kind is what a granted hold's Lock holds.
	kind() holdKind
	// watch asks the backend for the target's notifications, which wake
	// the head of its local queue.
	watch() (<-chan struct{}, func())
	// marks says whether a refused attempt with queue may leave a trace
	// (a waiting writer's mark) that a call giving up must take out.
	marks() bool
}

// holdCall is one acquisition of a hold: queued behind this Locker's
// earlier calls on the target, then (the head) trying the backend and
// parking between attempts until a hold is granted or the call gives up.
type holdCall struct {
	t          *holdTarget
	src        holdSource
	caller     context.Context // the hold's context carries its values
	ctx        context.Context // caller's, with the call's span
	span       trace.Span
	wait       bool
	w          *waiter
	bo         backoff
	owner      string        // the attempts' holder id; a new one after an unknown outcome
	marked     bool          // an attempt of owner was refused with queue
	remaining  time.Duration // the shortest lease left in the way, as last seen
	lastErr    error         // the last attempt's server error, until one is answered
	subscribed bool
}

func acquireHold(ctx context.Context, src holdSource, spanName string, wait bool) (*Lock, error) {
	t := src.target()
	l := t.l
	c := &holdCall{t: t, src: src, caller: ctx, wait: wait, bo: backoff{min: t.lc.retryMin, max: t.lc.retryMax}}
	c.ctx, c.span = l.tel.startSpan(ctx, spanName, t.name, 0)
	if err := c.ctx.Err(); err != nil {
		return c.end(nil, errors.Join(ErrNotAcquired, err))
	}
	w, err := l.enqueue(t.qkey, wait, "", nil) // nil: never handed a lock
	if err != nil {
		return c.end(nil, err)
	}
	c.w = w
	// Not "acquired": the next head tries at once, as another hold may be
	// free (a permit, a read), where a lock's next waiter waits for a release.
	defer l.dequeue(t.qkey, w, false)
	defer c.abandon()
	if stop := c.waitFor(w.turn, nil); stop != nil {
		return c.end(nil, stop)
	}
	for {
		lk, ended, err := c.try()
		if ended {
			return c.end(lk, err)
		}
		if !c.subscribed {
			c.subscribed = true
			if l.subscribeWith(c.ctx, t.qkey, src.watch) {
				continue // a release before the subscription was confirmed is not missed
			}
		}
		d := c.bo.next()
		if c.remaining > 0 && d > c.remaining+time.Millisecond {
			d = c.remaining + time.Millisecond
		}
		tm := time.NewTimer(d)
		stop := c.waitFor(w.wake, tm.C)
		tm.Stop()
		if stop != nil {
			return c.end(nil, stop)
		}
	}
}

// try makes one attempt; ended says whether the call ends with lk or err,
// or goes on to wait.
func (c *holdCall) try() (lk *Lock, ended bool, err error) {
	t, l := c.t, c.t.l
	if c.owner == "" {
		c.owner = l.newOwner() // a clean-up frees only its own
	}
	owner, sent := c.owner, l.now()
	g, err := c.src.attempt(c.ctx, owner, c.wait)
	if err == nil {
		err = checkHold(g, c.src.leastToken())
	}
	if err == nil && g.Status == backend.Acquired {
		err = l.lateGrant(sent, t.lc.ttl)
	}
	if err != nil {
		if !errors.Is(err, backend.ErrGivenBack) && !errors.Is(err, ErrInvalid) {
			giveBack(c.src.kind(), t, owner)
		}
		c.owner, c.marked = "", false
		return c.failed(err)
	}
	if g.Status == backend.Held {
		l.tel.contention.Add(context.Background(), 1)
		c.remaining, c.lastErr = g.Remaining, nil
		if !c.wait {
			return nil, true, ErrNotAcquired
		}
		c.marked = c.src.marks()
		return nil, false, nil
	}
	c.owner, c.marked = "", false // held now: no clean-up on the way out
	lk = newLock(c.caller, l, t.name, t.key, owner, g.Token, &t.lc, sent)
	lk.kind = c.src.kind()
	if err := l.renew.add(lk); err != nil { // Close came first
		lk.finish(ErrReleased, "")
		giveBack(lk.kind, t, owner)
		return nil, true, err
	}
	return lk, true, nil
}

// abandon takes out the waiting mark a call that gave up may have left.
func (c *holdCall) abandon() {
	if c.marked {
		giveBack(c.src.kind(), c.t, c.owner)
	}
}

// checkHold refuses what a backend may not answer: a grant without a token
// would break every fence downstream.
func checkHold(g backend.Grant, least int64) error {
	switch {
	case g.Status == backend.Held:
		return nil
	case g.Status != backend.Acquired:
		return fmt.Errorf("mutex: the backend answered an attempt with status %d", g.Status)
	case g.Token < least:
		return fmt.Errorf("mutex: the backend granted token %d; tokens are at least %d", g.Token, least)
	}
	return nil
}

// failed handles an attempt that failed on the way to or on the server.
func (c *holdCall) failed(err error) (*Lock, bool, error) {
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
	c.t.l.tel.attemptFailed(c.span, err)
	if !c.wait {
		return nil, true, err
	}
	c.lastErr, c.remaining = err, 0
	return nil, false, nil
}

// waitFor is the one place a call blocks: for its turn, or a wake-up or
// the poll. It returns why the call must stop: ErrClosed, or ErrNotAcquired
// with the ctx's error.
func (c *holdCall) waitFor(ch <-chan struct{}, poll <-chan time.Time) error {
	select {
	case <-ch:
	case <-poll:
	case <-c.ctx.Done():
		return errors.Join(ErrNotAcquired, c.ctx.Err(), c.lastErr)
	case <-c.t.l.done:
		return ErrClosed
	}
	return nil
}

// end records the call's outcome on its span, and returns.
func (c *holdCall) end(lk *Lock, err error) (*Lock, error) {
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
	if lk != nil && c.span.IsRecording() {
		c.span.SetAttributes(attrToken.Int64(lk.token))
	}
	endSpan(c.span, outcome, err)
	return lk, err
}

// giveBack frees, in the background, what owner (a random id) may hold of
// t: an attempt whose outcome is unknown, or whose grant was refused, or a
// waiting writer's mark.
func giveBack(k holdKind, t *holdTarget, owner string) {
	t.l.afterward(func(ctx context.Context) {
		_, _ = k.releaseHold(ctx, backend.Lease{Key: t.key, Owner: owner})
	})
}
