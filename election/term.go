package election

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redfence/redfence/mutex"
)

// Term is one leadership of one candidate: the election's lock, held. It
// is a mutex.Hold. Its methods are safe for concurrent use.
//
// The term owns a goroutine that renews the lease every retry period and
// ends the term (cancels its context) when the lock is lost, when no
// renewal succeeded within the renew deadline, or on Release; it then stops
// renewing, so that the lock is either released (Release) or runs out
// within a lease, whatever the leader's code still does.
//
// An ended term does not make its writes refused by itself. A write done
// on the term's Context stops at once (a fence returns the context's error
// before any round trip): that is how a leader stops writing when its term
// ends. A write under another context still carries a token that is the
// resource's highest, and a fence accepts it (an equal token is the same
// holder) until a newer term writes; from then on it is refused.
type Term struct {
	e      *Election
	lk     *mutex.Lock
	value  string
	owner  string
	since  time.Time // set by begin, before the term is handed out
	ctx    context.Context
	cancel context.CancelCauseFunc

	// begun is closed once Campaign decided whether the term began
	// (started) or was given up; the keeper calls OnStopped only for a term
	// that began, and only after it.
	begun   chan struct{}
	started bool
	clean   bool          // the term before ended by resignation (journal): no lock-delay
	done    chan struct{} // the keeper returned: no renewal, OnStopped done

	mu      sync.Mutex // a leaf
	renewBy time.Time  // the renew deadline: the term ends then unless a renewal succeeds

	release    sync.Once
	releaseErr error
}

var _ mutex.Hold = (*Term)(nil)

func newTerm(e *Election, lk *mutex.Lock, value, owner string) *Term {
	t := &Term{e: e, lk: lk, value: value, owner: owner, begun: make(chan struct{}), done: make(chan struct{})}
	// Values of the lock's context (Lock(t.Context(), key) re-enters), its
	// end through the keeper, which gives the term's cause.
	t.ctx, t.cancel = context.WithCancelCause(context.WithoutCancel(lk.Context()))
	// The lease began when the Lock call sent its attempt: its local
	// deadline less the lease and the drift margin.
	lease := e.cfg.lease
	acquired := lk.Deadline().Add(-(lease - e.l.ClockDrift(lease)))
	t.renewBy = acquired.Add(e.cfg.renew)
	go t.keep(acquired)
	return t
}

// Token returns the term: the lock's fencing token, strictly greater than
// every earlier term of the election. Give it to the resources the leader
// writes (package fenced) so that they refuse a deposed leader.
func (t *Term) Token() int64 {
	if t == nil {
		return 0
	}
	return t.lk.Token()
}

// Value returns the value the leader campaigned with.
func (t *Term) Value() string {
	if t == nil {
		return ""
	}
	return t.value
}

// Since returns when the term began, by this process's clock (ms).
func (t *Term) Since() time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.since
}

// Context is done when the term ends: lost (cause matching ErrLost),
// resigned (ErrResigned), or Run's context ended (ErrStopped). Work done as
// leader should watch it; context.Cause says why it ended.
func (t *Term) Context() context.Context {
	if t == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrLost)
		return ctx
	}
	return t.ctx
}

// Deadline returns when the term ends unless a renewal succeeds first: the
// start of the last successful renewal (of the acquisition, before one)
// plus the renew deadline, which comes before the lock's local lease
// deadline. It is zero once the term ended.
func (t *Term) Deadline() time.Time {
	if t == nil || t.ctx.Err() != nil {
		return time.Time{}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.renewBy
}

func (t *Term) setRenewBy(d time.Time) {
	t.mu.Lock()
	t.renewBy = d
	t.mu.Unlock()
}

// Release resigns: it ends the term (its context's cause ErrResigned,
// unless it had ended already), waits for its goroutine (OnStopped
// included), marks the term resigned in the journal while the lock is
// still held, so that the next leader has no lock-delay, and releases the
// lock. It is idempotent: calls after the first return the first one's
// result. A term already lost returns nil: nothing is left to give up. On
// a server error the lock runs out within a lease. A ctx that ends first
// returns ctx.Err() and leaves the lock to run out.
func (t *Term) Release(ctx context.Context) error {
	if t == nil || ctx == nil {
		return invalid("nil Term or context")
	}
	t.cancel(ErrResigned)
	select {
	case <-t.done:
	case <-ctx.Done():
		return ctx.Err()
	}
	t.release.Do(func() { t.releaseErr = t.resign(ctx) })
	return t.releaseErr
}

// resign marks the term resigned (when it ended cleanly and the lock is
// still held) and unlocks it.
func (t *Term) resign(ctx context.Context) error {
	var errs []error
	if t.e.j != nil && t.started && t.lk.Context().Err() == nil && !errors.Is(context.Cause(t.ctx), ErrLost) {
		if _, err := t.e.j.ResignTerm(ctx, t.e.key, t.Token(), time.Now().Truncate(time.Millisecond)); err != nil {
			errs = append(errs, fmt.Errorf("election: marking term %d resigned: %w", t.Token(), err))
		}
	}
	if err := t.lk.Release(ctx); err != nil && !errors.Is(err, mutex.ErrNotHeld) {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// start begins the term: OnStarted, then the keeper may call OnStopped.
func (t *Term) start() {
	t.started = true
	t.e.addTerm(t)
	t.e.tel.termStarted(t)
	if fn := t.e.cfg.onStarted; fn != nil {
		fn(t)
	}
	close(t.begun)
}

// abort gives up a term that did not begin, releasing its lock.
func (t *Term) abort() {
	close(t.begun)
	t.cancel(errors.New("election: the term did not begin"))
	<-t.done
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = t.lk.Release(ctx)
}

// keep renews the lease until the term ends, then reports the end.
// acquired is about when the lock's lease began.
func (t *Term) keep(acquired time.Time) {
	defer close(t.done)
	t.renewUntilEnd(acquired)
	<-t.begun
	if !t.started {
		return
	}
	cause := context.Cause(t.ctx)
	t.e.dropTerm(t)
	t.e.tel.termEnded(t, cause)
	if fn := t.e.cfg.onStopped; fn != nil {
		fn(t, cause)
	}
}

// renewUntilEnd extends the lease every retry period and returns when the
// term's context ended, ending it itself on a lost lock or a passed renew
// deadline.
func (t *Term) renewUntilEnd(last time.Time) {
	cfg := &t.e.cfg
	timer := time.NewTimer(cfg.retry)
	defer timer.Stop()
	for {
		select {
		case <-t.ctx.Done():
			return
		case <-t.lk.Context().Done():
			t.cancel(&lostError{context.Cause(t.lk.Context())})
			return
		case <-timer.C:
		}
		deadline := last.Add(cfg.renew)
		if !time.Now().Before(deadline) {
			t.cancel(fmt.Errorf("%w: no renewal succeeded within the renew deadline %v", ErrLost, cfg.renew))
			return
		}
		sent := time.Now()
		rctx, cancel := context.WithDeadline(t.ctx, deadline)
		err := t.lk.Extend(rctx, cfg.lease)
		cancel()
		switch {
		case err == nil:
			last = sent
			t.setRenewBy(last.Add(cfg.renew))
		case errors.Is(err, mutex.ErrNotHeld):
			t.cancel(&lostError{mutex.ErrLockLost})
			return
		}
		timer.Reset(min(cfg.retry, max(time.Until(last.Add(cfg.renew)), 0)))
	}
}
