package mutex

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redfence/redfence/mutex/backend"
)

// renewBatch bounds the commands in one pipelined round trip of renewals.
const renewBatch = 1000

// renewer is the Locker's one renewal loop for all its locks. It wakes when
// the earliest lock is due (TTL/3 after its last renewal) and extends, in
// pipelined batches, every lock due within the next TTL/6, so that locks taken
// at nearby times share round trips.
//
// Lock order: renewer.mu, then Lock.mu.
type renewer struct {
	l       *Locker
	mu      sync.Mutex
	locks   map[*Lock]struct{} // every held lock, renewed or not (Close releases them)
	running bool
	stopped bool
	asleep  time.Time // when the loop wakes next; zero while it works (it plans again after)
	lastDue time.Time // the latest due time of a lock added: an idle loop stays due then
	wake    chan struct{}
	wakes   atomic.Int64 // times add woke the loop (tests)

	// The lease deadlines of all held locks are watched by one timer, armed
	// for the earliest (expireAt), instead of a timer per lock: arming a
	// timer earlier than its P's earliest one makes the runtime wake a
	// thread, a context switch on every Lock. A lock whose deadline is after
	// expireAt changes nothing; when the timer fires, it ends the locks
	// whose deadline passed and arms itself for the next.
	expiry       *time.Timer
	expireAt     time.Time          // what expiry is armed for; zero: not armed
	lastDeadline time.Time          // the latest deadline of a lock added
	halted       bool               // Close is done with the timer: a late run does nothing
	closing      context.Context    // done once stop began: ends the loop and renewals in flight
	stopNow      context.CancelFunc // ends closing
	wg           sync.WaitGroup
}

func newRenewer(l *Locker) *renewer {
	r := &renewer{l: l, locks: map[*Lock]struct{}{}, wake: make(chan struct{}, 1)}
	r.closing, r.stopNow = context.WithCancel(context.Background())
	return r
}

func (r *renewer) add(lk *Lock) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return ErrClosed
	}
	lk.mu.Lock()
	done, deadline, due := lk.done, lk.deadline, lk.nextRenew
	lk.mu.Unlock()
	if done {
		// Lost before it could be added (its lease ended while the acquire
		// was in flight): finish already ran its remove; adding it now would
		// keep a dead lock in the loop for ever.
		return nil
	}
	r.locks[lk] = struct{}{}
	if deadline.After(r.lastDeadline) {
		r.lastDeadline = deadline
	}
	r.armLocked(deadline)
	if lk.autoRenew {
		if !r.running {
			r.running = true
			r.wg.Add(1)
			go r.loop() // owned by the renewer: stop ends it and waits (r.wg)
		}
		// Waking the loop costs a context switch per Lock; only do it when
		// this lock falls due before the loop would wake anyway (see plan).
		if due.After(r.lastDue) {
			r.lastDue = due
		}
		if !r.asleep.IsZero() && due.Before(r.asleep) {
			select {
			case r.wake <- struct{}{}:
				r.wakes.Add(1)
			default:
			}
		}
	}
	return nil
}

func (r *renewer) remove(lk *Lock) {
	r.mu.Lock()
	delete(r.locks, lk)
	r.mu.Unlock()
}

// watch makes sure the expiry timer fires by deadline.
func (r *renewer) watch(deadline time.Time) {
	r.mu.Lock()
	r.armLocked(deadline)
	r.mu.Unlock()
}

// armLocked arms the expiry timer for deadline unless it fires earlier
// already. Called with r.mu held.
func (r *renewer) armLocked(deadline time.Time) {
	if r.halted || !r.expireAt.IsZero() && !deadline.Before(r.expireAt) {
		return
	}
	r.expireAt = deadline
	d := deadline.Sub(r.l.now())
	if r.expiry == nil {
		r.expiry = time.AfterFunc(d, r.expire)
	} else {
		r.expiry.Reset(d)
	}
}

// expire runs on the expiry timer: it ends the locks whose lease deadline
// passed (by the Locker's clock; the timer runs on real time) and arms the
// timer for the earliest deadline left. With no lock left but some taken
// lately, it stays armed for the latest deadline seen, so that the next
// lock, whose deadline comes later, need not arm it; after Close, with
// nothing held, it stops.
func (r *renewer) expire() {
	now := r.l.now()
	var lost []*Lock
	r.mu.Lock()
	if r.halted {
		r.mu.Unlock()
		return
	}
	r.expireAt = time.Time{}
	var next time.Time
	for lk := range r.locks {
		lk.mu.Lock()
		deadline, done := lk.deadline, lk.done
		lk.mu.Unlock()
		switch {
		case done:
		case !now.Before(deadline):
			lost = append(lost, lk)
		case next.IsZero() || deadline.Before(next):
			next = deadline
		}
	}
	if next.IsZero() && len(lost) == 0 && !r.stopped && r.lastDeadline.After(now) {
		next = r.lastDeadline
	}
	if !next.IsZero() {
		r.armLocked(next)
	}
	r.mu.Unlock()
	for _, lk := range lost {
		lk.lose("lease deadline passed")
	}
}

// halt stops the expiry timer once Close has finished every lock; a run
// that had already fired returns at once.
func (r *renewer) halt() {
	r.mu.Lock()
	r.halted = true
	if r.expiry != nil {
		r.expiry.Stop()
	}
	r.expireAt = time.Time{}
	r.mu.Unlock()
}

// stop ends the loop, waits for it, and returns the locks still held.
func (r *renewer) stop() []*Lock {
	r.mu.Lock()
	r.stopped = true
	r.stopNow()
	held := make([]*Lock, 0, len(r.locks))
	for lk := range r.locks {
		held = append(held, lk)
	}
	r.mu.Unlock()
	r.wg.Wait()
	return held
}

func (r *renewer) loop() {
	defer r.wg.Done()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		select {
		case <-r.closing.Done():
			return
		default:
		}
		due, wait := r.plan(r.l.now())
		if len(due) > 0 {
			r.renew(due)
			continue
		}
		t.Reset(wait)
		select {
		case <-r.wake:
		case <-t.C:
		case <-r.closing.Done():
			return
		}
		t.Stop()
	}
}

// plan returns the auto-renewed locks due by now (+ a sixth of their TTL),
// or, when none is, how long the loop may sleep. Under the same mutex as add
// it records when the loop wakes (asleep), so that add wakes it only for a
// lock due before then; while locks are renewed asleep is zero, as the loop
// plans again afterwards.
//
// With nothing to renew but locks taken lately, the loop stays due when the
// latest of them would have been: a lock taken after it, with the same TTL,
// falls due later and need not wake the loop, so a stream of short
// Lock/Release cycles costs no context switch per Lock. Without locks since,
// it sleeps long (and the next lock wakes it).
func (r *renewer) plan(now time.Time) (due []*Lock, wait time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var next time.Time
	for lk := range r.locks {
		if !lk.autoRenew {
			continue
		}
		lk.mu.Lock()
		at, ttl, retryAt, done := lk.nextRenew, lk.ttl, lk.retryAt, lk.done
		lk.mu.Unlock()
		if done {
			continue // finished meanwhile; remove is on its way
		}
		if retryAt.After(now) {
			// A renewal just failed: wait before the next attempt, whatever
			// the batching window says.
			if next.IsZero() || retryAt.Before(next) {
				next = retryAt
			}
			continue
		}
		if !at.After(now.Add(ttl / 6)) {
			due = append(due, lk)
		} else if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	r.asleep = time.Time{}
	if len(due) > 0 {
		return due, 0
	}
	wait = time.Hour
	switch {
	case !next.IsZero():
		wait = next.Sub(now)
	case r.lastDue.After(now):
		wait = r.lastDue.Sub(now)
	}
	r.asleep = now.Add(wait)
	return nil, wait
}

func (r *renewer) renew(due []*Lock) {
	for len(due) > 0 {
		n := min(len(due), renewBatch)
		r.renewChunk(due[:n])
		due = due[n:]
	}
}

func (r *renewer) renewChunk(locks []*Lock) {
	l := r.l
	ttls := make([]time.Duration, len(locks))
	deadline := time.Time{}
	for i, lk := range locks {
		lk.mu.Lock()
		ttls[i] = lk.ttl
		if deadline.IsZero() || lk.deadline.Before(deadline) {
			deadline = lk.deadline
		}
		lk.mu.Unlock()
	}
	// Nothing is gained by waiting past the earliest lease deadline, nor
	// once Close began.
	ctx, cancel := context.WithDeadline(r.closing, deadline)
	defer cancel()

	start := l.now()
	results, sent, why := l.extend(ctx, locks, ttls)
	rtt := l.now().Sub(sent)
	for i, lk := range locks {
		outcome, err := "extended", error(nil)
		switch results[i] {
		case backend.Renewed:
			lk.renewed(sent, ttls[i])
		case backend.Gone:
			lk.lose("renewal found the lock gone")
			outcome, err = "not_held", ErrNotHeld
		default:
			r.retrySoon(lk) // outcome unknown: the lease deadline decides
			if why == nil {
				why = unavailable(errNoAnswer)
			}
			outcome, err = "error", why
		}
		l.tel.renewal(context.Background(), "redfence.Renew", lk.key, lk.token, start, outcome, err, err == nil && lateRenewal(rtt, ttls[i]))
	}
}

// retrySoon schedules another renewal attempt after a failed one; the local
// lease deadline ends the lock if none succeeds in time.
func (r *renewer) retrySoon(lk *Lock) {
	lk.mu.Lock()
	lk.retryAt = r.l.now().Add(max(lk.ttl/10, time.Millisecond))
	lk.nextRenew = lk.retryAt
	lk.mu.Unlock()
}

// claim takes lk out of the locks Close would release, so that its holder
// releases it itself; false once Close has begun, which releases it.
func (r *renewer) claim(lk *Lock) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return false
	}
	delete(r.locks, lk)
	return true
}
