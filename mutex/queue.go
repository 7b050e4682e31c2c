package mutex

import (
	"context"
	"time"
)

// queue holds the goroutines of one Locker waiting for one key, in arrival
// order. Only the head talks to Redis; the others wait for their turn.
type queue struct {
	waiters    []*waiter
	slot       [1]*waiter // the waiters' first storage: one waiter needs no allocation
	first      waiter     // the first waiter's storage, likewise
	subscribed bool       // the head asked the backend for the key's release notifications
	unwatch    func()     // ends them; nil until the backend's watch returned, or when it polls
	handoffs   int        // hand-offs in a row; capped so other processes get a turn
	inBackend  bool       // this Locker is in the key's waiting queue in the backend (backend.Queuer)
}

// inBackendQueue reports whether this Locker joined key's queue in the
// backend (an attempt found the lock held and none has succeeded since).
func (l *Locker) inBackendQueue(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[key]
	return q != nil && q.inBackend
}

func (l *Locker) setInBackendQueue(key string, in bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.queues[key]; q != nil {
		q.inBackend = in
	}
}

type waiter struct {
	turn   chan struct{} // closed when this waiter becomes the head
	wake   chan struct{} // a release was seen; buffered, holds one signal
	quiet  bool          // became head as a local goroutine acquired: expect a release first
	first  bool          // head on arrival: nobody in this Locker waited for the key
	queued bool          // a Lock (not a TryLock): may have joined the key's queue in Redis

	// Hand-off, all under Locker.mu: a head parked in its wait, with
	// what taking the lock for it needs, can be reserved by an Release, which
	// then sends exactly one offer.
	owner    string
	lc       *lockConfig
	parked   bool
	reserved bool
	offer    chan handoff // buffered, one; made when first parked
}

// closedTurn is the turn of a waiter that arrives at an empty queue.
var closedTurn = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// readyForOffers makes w's offer channel; under Locker.mu, before w can be
// reserved (parked).
func (w *waiter) readyForOffers() {
	if w.offer == nil {
		w.offer = make(chan handoff, 1)
	}
}

// handoff is an Release's offer to the next local waiter: the lock, taken for
// it in the same round trip that released the previous holder (ok), or
// nothing (the waiter goes on as before).
type handoff struct {
	ok     bool
	token  int64
	handle any // the backend's, for the Lock (Lock.handle)
	sent   time.Time
}

// maxHandoffs caps hand-offs in a row on one key: then a release goes out
// through Redis (and its notification), so waiters in other processes get a
// chance; within the process the queue stays FIFO.
const maxHandoffs = 8

// renameWaiter sets the owner an Release hands w the lock for, when w's call
// takes a fresh owner id for its next attempt; w is not parked then.
func (l *Locker) renameWaiter(w *waiter, owner string) {
	l.mu.Lock()
	w.owner = owner
	l.mu.Unlock()
}

// park marks w as waiting for a release, ready to be handed the lock.
func (l *Locker) park(w *waiter) {
	l.mu.Lock()
	w.readyForOffers()
	w.parked = true
	l.mu.Unlock()
}

// unpark ends w's wait; if an Release reserved w meanwhile, it waits for that
// Release's offer and returns it.
func (l *Locker) unpark(w *waiter) (handoff, bool) {
	l.mu.Lock()
	w.parked = false
	reserved := w.reserved
	w.reserved = false
	l.mu.Unlock()
	if !reserved {
		return handoff{}, false
	}
	return <-w.offer, true
}

// served ends w's wait after it received its offer while still parked.
func (l *Locker) served(w *waiter) {
	l.mu.Lock()
	w.parked, w.reserved = false, false
	l.mu.Unlock()
}

// reserveHandoff returns the parked head waiting for key, reserved for a
// hand-off, or nil when there is none (or the streak is at its cap).
func (l *Locker) reserveHandoff(key string) *waiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[key]
	if q == nil || len(q.waiters) == 0 || l.closed {
		return nil
	}
	w := q.waiters[0]
	if !w.parked || w.reserved || w.lc == nil {
		return nil
	}
	if q.handoffs >= maxHandoffs {
		q.handoffs = 0
		return nil
	}
	q.handoffs++
	w.reserved = true
	return w
}

// enqueue appends a waiter for key. A TryLock (wait false) behind local
// waiters gets ErrNotAcquired without asking Redis: they were first.
//
// owner and lc (nil: never) are what an Release needs to hand this waiter the
// lock directly.
func (l *Locker) enqueue(key string, wait bool, owner string, lc *lockConfig) (*waiter, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	q := l.queues[key]
	var w *waiter
	if q == nil {
		q = &queue{}
		q.waiters = q.slot[:0]
		l.queues[key] = q
		w = &q.first
	} else if !wait && len(q.waiters) > 0 {
		return nil, ErrNotAcquired
	} else {
		w = new(waiter)
	}
	*w = waiter{wake: make(chan struct{}, 1), owner: owner, lc: lc, queued: wait}
	if len(q.waiters) == 0 {
		w.first, w.turn = true, closedTurn
	} else {
		w.turn = make(chan struct{})
	}
	q.waiters = append(q.waiters, w)
	l.waiters.Add(1)
	return w, nil
}

// dequeue removes w. If w was the head, the next waiter becomes head; when w
// just acquired the lock, that waiter waits for the release before trying.
// The last waiter out drops the subscription.
func (l *Locker) dequeue(key string, w *waiter, acquired bool) {
	if w == nil {
		return
	}
	l.mu.Lock()
	q := l.queues[key]
	if q == nil {
		l.mu.Unlock()
		return
	}
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		l.waiters.Add(-1)
		if i == 0 && len(q.waiters) > 0 {
			next := q.waiters[0]
			next.quiet = acquired
			// A quiet head asks Redis nothing before its first wait: it can
			// be handed the lock from now on, even before it runs.
			if acquired {
				next.readyForOffers()
				next.parked = true
			}
			close(next.turn) // never closedTurn: next was not the head on arrival
		}
		break
	}
	var unwatch func()
	if len(q.waiters) == 0 {
		if q.inBackend && !l.closed {
			// Nobody here waits for key any more: leave the backend's
			// queue, so a release is not reserved for us in vain. (An
			// acquisition left it already; one by a local hand-off, or
			// none, did not.)
			lockKey := key
			l.afterward(func(ctx context.Context) { _ = l.drv.q.Leave(ctx, lockKey, l.id) })
		}
		delete(l.queues, key)
		unwatch = q.unwatch
	}
	l.mu.Unlock()
	if unwatch != nil {
		unwatch()
	}
}

// wakeLocal signals the head waiting for key, if any; it never blocks.
func (l *Locker) wakeLocal(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.queues[key]; q != nil && len(q.waiters) > 0 {
		select {
		case q.waiters[0].wake <- struct{}{}:
		default:
		}
	}
}
