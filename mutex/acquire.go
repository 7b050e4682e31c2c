package mutex

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// Lock acquires the lock on key, waiting until it is free or ctx ends.
// Goroutines of one Locker waiting for a key queue in arrival order and
// only the head asks the backend, woken by a release (here directly,
// elsewhere through the backend's notification) or a jittered poll bounded
// by the holder's remaining lease (WithRetry). A context of a held Lock on
// the same key re-enters it (the same *Lock, count+1, no round trip); the
// holder's WithOwner id re-enters in the backend (count+1, same token).
//
// Lock waits as long as ctx allows, also while the store is unreachable:
// pass a ctx with a deadline. When ctx ends first, returns
// errors.Join(ErrNotAcquired, ctx.Err()) and, when the last attempts failed
// or went unanswered, an error matching ErrUnavailable that wraps the
// store's. Whatever an attempt cut short may have taken is freed on a
// context of its own.
func (l *Locker) Lock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, "redfence.Lock", key, true, opts)
}

// TryLock makes one attempt: the lock, ErrNotAcquired when another owner
// holds it, or an error matching ErrUnavailable that wraps the store's. It
// re-enters like Lock. Waiters go first: while Lock calls of this Locker
// wait for the key, TryLock returns ErrNotAcquired without asking the
// store, and a lock reserved for another Locker's waiter counts as held.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, "redfence.TryLock", key, false, opts)
}

// Do runs fn while holding the lock on key: Lock, fn, Release. fn's
// context (lk.Join(ctx)) ends when ctx ends or the lock is lost;
// context.Cause says which. It returns fn's error, or the Release's when fn
// succeeded; the Release runs on a context of its own. If fn panics the
// lock is released and the panic goes on.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context, lk *Lock) error, opts ...LockOption) (err error) {
	if fn == nil {
		return invalid("nil function")
	}
	lk, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if uerr := lk.Release(uctx); err == nil && !errors.Is(uerr, ErrNotHeld) {
			err = uerr
		}
	}()
	fctx, cancel := lk.Join(ctx)
	defer cancel()
	return fn(fctx, lk)
}

func (l *Locker) lock(ctx context.Context, spanName, key string, wait bool, opts []LockOption) (*Lock, error) {
	if err := l.check(ctx, key); err != nil {
		return nil, err
	}
	a := &acquisition{l: l, caller: ctx, key: key, wait: wait}
	a.lc.init(opts)
	if err := l.checkLock(&a.lc); err != nil {
		return nil, err
	}
	return a.begin(ctx, spanName)
}

// checkLock refuses a call's bad options.
func (l *Locker) checkLock(lc *lockConfig) error {
	if lc.err != nil {
		return lc.err
	}
	if lc.replicas > 0 && l.drv.ra == nil {
		return invalid("WithReplicaAck applies to a single Redis deployment (redisdriver) alone; this Locker's servers have no replicas to wait for")
	}
	return nil
}

// begin runs a checked call, its span a child of spanCtx's (the caller's
// ctx, or a LockAll's, which ends when the caller's does).
func (a *acquisition) begin(spanCtx context.Context, spanName string) (*Lock, error) {
	l, key, lc := a.l, a.key, &a.lc
	a.start = time.Now()
	a.ctx, a.span = l.tel.startSpan(spanCtx, spanName, key, 0)
	if lk := heldIn(a.ctx, l, key); lk != nil && lk.reenter() {
		return a.end(lk, "reentered", nil)
	}
	if err := a.ctx.Err(); err != nil {
		return a.end(nil, "cancelled", errors.Join(ErrNotAcquired, err))
	}
	a.owner, a.randomOwner = lc.owner, lc.owner == ""
	if a.randomOwner {
		a.owner = l.newOwner()
	}
	a.lockKey = key
	var handoffTo *lockConfig
	if l.drv.ho != nil && lc.replicas == 0 {
		handoffTo = lc // a local Release may hand the lock straight to us
	}
	w, err := l.enqueue(key, a.wait, a.owner, handoffTo)
	if err != nil {
		return a.end(nil, "closed", err)
	}
	a.w = w
	defer func() { l.dequeue(key, a.w, a.acquired) }()
	return a.run()
}

// acquisition is one Lock or TryLock call on its way to a lock, through
// these states:
//
//	queued   behind this Locker's earlier calls for the key: waits for its
//	         turn at the head of the local queue
//	trying   the head: one attempt in Redis (try)
//	parked   the attempt found the lock held: waits for a release (a local
//	         wake-up or a notification), the fallback poll, or a local
//	         Release's hand-off (park)
//	ended    acquired, or given up: ctx ended, the Locker closed, a TryLock
//	         refused (end)
//
// A head promoted while a local goroutine takes the lock (quiet) parks
// before it tries: the lock is about to be held. The first failed attempt
// subscribes to the key's releases and tries again at once, so that a
// release in between is not missed. Every wait is one select (wait), for
// cancellation and Close alike.
type acquisition struct {
	l           *Locker
	caller      context.Context // the lock's context carries its values (newLock)
	ctx         context.Context // caller's, with the call's span
	span        trace.Span
	start       time.Time
	key         string
	lockKey     string
	wait        bool       // Lock, not TryLock
	inner       bool       // one key of a LockAll, which records the metrics
	lc          lockConfig // the call's options, allocated with the acquisition
	owner       string
	randomOwner bool // owner is ours to change: a fresh one per attempt
	w           *waiter
	acquired    bool

	attempts   int
	subscribed bool
	bo         backoff
	remaining  time.Duration // the holder's lease left, as the last attempt saw it
	lastErr    error         // the last attempt's server error, until an attempt is answered
	answered   bool          // an attempt got the server's answer
}

// run takes the call from queued to ended.
func (a *acquisition) run() (*Lock, error) {
	if _, _, stop := a.waitFor(a.w.turn, nil, nil, nil); stop != nil {
		return a.giveUp(stop)
	}
	a.bo = backoff{min: a.lc.retryMin, max: a.lc.retryMax}
	quiet := a.w.quiet
	for {
		if !quiet {
			if lk, ended, err := a.try(); ended {
				return lk, err
			}
			if !a.subscribed {
				a.subscribed = true
				a.l.subscribe(a.ctx, a.key, a.lockKey)
				continue
			}
		}
		quiet = false
		if lk, ended, err := a.park(); ended {
			return lk, err
		}
	}
}

// try makes one attempt in Redis; ended says whether the call ends with lk
// or err, or goes on to park.
func (a *acquisition) try() (lk *Lock, ended bool, err error) {
	a.attempts++
	if a.randomOwner && a.attempts > 1 {
		// A fresh id per attempt, so that the clean-up of an earlier
		// attempt (a late grant, an abandoned call) can never free this
		// one's acquisition, nor this one re-enter what that clean-up is
		// about to free.
		a.owner = a.l.newOwner()
		a.l.renameWaiter(a.w, a.owner)
	}
	l := a.l
	sent := l.now()
	// A call that found no local waiter before it makes its first attempt
	// as a TryLock would (fewer arguments); only when that finds the lock
	// held does it queue, with the retry that follows its subscription.
	res, err := l.attempt(a, a.wait && !(a.attempts == 1 && a.w.first), sent)
	switch {
	case err != nil:
		return a.failed(err, sent)
	case res.status == 0:
		l.tel.contention.Add(context.Background(), 1)
		a.lastErr, a.answered = nil, true
		if !a.wait {
			err := error(ErrNotAcquired)
			if res.why != nil {
				err = res.why
			}
			lk, err := a.end(nil, "contended", err)
			return lk, true, err
		}
		a.remaining = res.remaining
		return nil, false, nil
	}
	lk = newLock(a.caller, l, a.key, a.lockKey, a.owner, res.token, &a.lc, sent)
	lk.handle = res.handle
	outcome := "acquired"
	if res.status == 2 {
		outcome = "reentered"
	}
	lk, err = a.take(lk, outcome)
	return lk, true, err
}

// failed handles an attempt, sent at sent, that failed on the way to or on
// the server.
func (a *acquisition) failed(err error, sent time.Time) (*Lock, bool, error) {
	if errors.Is(err, ErrInvalid) { // the backend refused the input: no retry helps
		lk, err := a.end(nil, "invalid", err)
		return lk, true, err
	}
	if a.ctx.Err() != nil {
		// Cut short: an earlier attempt's failure, or the lack of an
		// answer, still says why none succeeded. An attempt that went
		// unanswered longer than the shortest poll is an outage even after
		// earlier answers said "held": a healthy server answers far sooner.
		if e := lastErrIf(err, a.ctx); e != nil {
			a.lastErr = unavailable(e)
		} else if a.lastErr == nil && (!a.answered || a.l.now().Sub(sent) >= a.lc.retryMin) {
			a.lastErr = unavailable(errNoAnswer)
		}
		lk, err := a.end(nil, "timeout", errors.Join(ErrNotAcquired, a.ctx.Err(), a.lastErr))
		return lk, true, err
	}
	err = unavailable(err)
	a.l.tel.attemptFailed(a.span, err)
	if !a.wait {
		lk, err := a.end(nil, "error", err)
		return lk, true, err
	}
	a.lastErr, a.remaining = err, 0
	return nil, false, nil
}

// park waits for a release, the poll or a hand-off.
func (a *acquisition) park() (*Lock, bool, error) {
	d := a.bo.next()
	if a.remaining > 0 && d > a.remaining+time.Millisecond {
		d = a.remaining + time.Millisecond
	}
	t := time.NewTimer(d)
	defer t.Stop()
	a.l.park(a.w)
	h, offered, stop := a.waitFor(nil, a.w.wake, t.C, a.w.offer)
	switch {
	case stop != nil:
		lk, err := a.giveUp(stop)
		return lk, true, err
	case offered: // reserved and served before it left the wait
		a.l.served(a.w)
	default:
		h, offered = a.l.unpark(a.w)
	}
	if !offered || !h.ok {
		return nil, false, nil // try again
	}
	lk := newLock(a.caller, a.l, a.key, a.lockKey, a.owner, h.token, &a.lc, h.sent)
	lk.handle = h.handle
	lk, err := a.take(lk, "acquired")
	return lk, true, err
}

// waitFor is the one place a call blocks: for its turn, or for a release
// (wake), the poll, or a hand-off (offer). It returns the hand-off, or why
// the call must stop: ErrClosed, or the ctx's error.
func (a *acquisition) waitFor(turn, wake <-chan struct{}, poll <-chan time.Time, offer <-chan handoff) (h handoff, offered bool, stop error) {
	select {
	case <-turn:
	case <-wake:
	case <-poll:
	case h = <-offer:
		return h, true, nil
	case <-a.ctx.Done():
		return h, false, a.ctx.Err()
	case <-a.l.done:
		return h, false, ErrClosed
	}
	return h, false, nil
}

// take makes lk this call's lock: watched by the renewer from here (also
// while replicaAck waits), acknowledged by replicas if asked.
func (a *acquisition) take(lk *Lock, outcome string) (*Lock, error) {
	if err := a.l.renew.add(lk); err != nil { // Close came first
		lk.finish(ErrReleased, "")
		if a.lc.owner == "" {
			a.l.abandon(a.lockKey, a.owner)
		} else { // one count: another holder may share the owner id
			a.l.afterward(func(ctx context.Context) { _, _ = a.l.release(ctx, lk) })
		}
		return a.end(nil, "closed", err)
	}
	if err := a.l.replicaAck(a.ctx, lk, &a.lc); err != nil {
		return a.end(nil, "replica_ack", err)
	}
	a.acquired = true
	return a.end(lk, outcome, nil)
}

// giveUp ends a call stopped while it waited, freeing a lock handed over to
// it just then.
func (a *acquisition) giveUp(stop error) (*Lock, error) {
	if h, ok := a.l.unpark(a.w); ok && h.ok {
		a.l.releaseHandedOff(a.lockKey, a.owner, h.token, h.handle)
	}
	if stop == ErrClosed {
		return a.end(nil, "closed", ErrClosed)
	}
	return a.end(nil, "timeout", errors.Join(ErrNotAcquired, stop, a.lastErr))
}

// end records the call's outcome on its span and metrics, and returns.
func (a *acquisition) end(lk *Lock, outcome string, err error) (*Lock, error) {
	wait := time.Since(a.start)
	if a.span.IsRecording() {
		a.span.SetAttributes(attrAttempts.Int(a.attempts), attrWait.Float64(wait.Seconds()),
			attrReentrant.Bool(outcome == "reentered"))
		if lk != nil {
			a.span.SetAttributes(attrToken.Int64(lk.token))
		}
	}
	endSpan(a.span, outcome, err)
	if a.inner {
		return lk, err
	}
	bg := context.Background()
	o := a.l.tel.outcomeAttrs(outcome)
	a.l.tel.acquireDur.Record(bg, wait.Seconds(), o.record...)
	a.l.tel.acquired.Add(bg, 1, o.add...)
	return lk, err
}

func lastErrIf(err error, ctx context.Context) error {
	if errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// errNoAnswer: a Lock gave up before any of its attempts got an answer.
var errNoAnswer = errors.New("no answer from the backend before the context ended")
