package mutex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex/backend"
)

// multi is one LockAll or TryLockAll call on its way to its Locks: group
// after group, in order, each tried together (tryGroup) or taken key by key
// with Lock's acquisition (takeGroup); on failure, what it took is given
// back before it returns (fail).
type multi struct {
	l         *Locker
	caller    context.Context // the locks' contexts carry its values
	ctx       context.Context // caller's, with the call's span
	span      trace.Span
	start     time.Time
	wait      bool // LockAll, not TryLockAll
	lc        lockConfig
	locks     []*Lock // taken so far, in order
	reentered int     // of locks, those re-entered through the caller's context
}

// takeGroup takes the keys of one group: those held through the caller's
// context re-entered; the others together in one step when the backend can
// (Batcher) and no call of this Locker waits for any of them (they go
// first); otherwise, or when that finds one held, one at a time, each
// waiting in the order.
func (m *multi) takeGroup(keys []string) error {
	l := m.l
	select {
	case <-l.done:
		return ErrClosed
	default:
	}
	var rest []string
	for _, k := range keys {
		if lk := heldIn(m.ctx, l, k); lk != nil && lk.reenter() {
			m.locks = append(m.locks, lk)
			m.reentered++
			continue
		}
		rest = append(rest, k)
	}
	if len(rest) > 1 && l.drv.ba != nil && m.lc.replicas == 0 && !l.waitedFor(rest) {
		if taken, err := m.tryGroup(rest); taken || err != nil {
			return err
		}
	}
	spanName := "redfence.TryLock"
	if m.wait {
		spanName = "redfence.Lock"
	}
	for _, k := range rest {
		a := &acquisition{l: l, caller: m.caller, key: k, wait: m.wait, inner: true, lc: m.lc}
		lk, err := a.begin(m.ctx, spanName)
		if err != nil {
			if errors.Is(err, ErrClosed) {
				return err
			}
			return fmt.Errorf("mutex: at key %q: %w", k, err)
		}
		m.locks = append(m.locks, lk)
	}
	return nil
}

// tryGroup makes one attempt at keys together. It reports whether it took
// them, or the error that ends the call; neither when LockAll is to take
// them one at a time (a key was held, or the attempt failed and ctx goes
// on: Lock's attempts retry with the backoff).
func (m *multi) tryGroup(keys []string) (taken bool, err error) {
	l := m.l
	owner, random := m.lc.owner, m.lc.owner == ""
	if random {
		owner = l.newOwner()
	}
	as := make([]backend.Attempt, len(keys))
	for i, k := range keys {
		as[i] = backend.Attempt{Key: k, Owner: owner, TTL: m.lc.ttl, Drift: l.drift(m.lc.ttl), Shared: !random}
	}
	sent := l.now()
	grants, busy, err := l.drv.ba.AcquireAll(m.ctx, as)
	var res []acquireResult
	if err == nil {
		res, err = l.checkGrants(grants, busy, len(keys), sent, m.lc.ttl)
	}
	switch {
	case err != nil:
		if random && !errors.Is(err, backend.ErrGivenBack) && !errors.Is(err, ErrInvalid) {
			for _, a := range as {
				l.abandon(a.Key, owner)
			}
		}
		m.groupEvent(len(keys), "error")
		return false, m.groupFailed(err)
	case busy >= 0:
		l.tel.contention.Add(context.Background(), 1)
		m.groupEvent(len(keys), "held")
		if m.wait {
			return false, nil
		}
		return false, fmt.Errorf("%w: key %q is held", ErrNotAcquired, keys[busy])
	}
	m.groupEvent(len(keys), "acquired")
	return true, m.takeGrants(keys, owner, res, sent)
}

// checkGrants checks what AcquireAll answered, as grantResult and
// lateGrant check Acquire's: every key granted with a token and in time, or
// a key busy.
func (l *Locker) checkGrants(grants []backend.Grant, busy, n int, sent time.Time, ttl time.Duration) ([]acquireResult, error) {
	if busy >= 0 {
		if busy >= n {
			return nil, fmt.Errorf("mutex: the backend found key %d of %d busy", busy, n)
		}
		return nil, nil
	}
	if len(grants) != n {
		return nil, fmt.Errorf("mutex: the backend granted %d keys of %d", len(grants), n)
	}
	res := make([]acquireResult, n)
	for i, g := range grants {
		r, err := grantResult(g)
		if err == nil && r.status == 0 {
			err = errors.New("mutex: the backend answered held among the grants")
		}
		if err != nil {
			return nil, err
		}
		res[i] = r
	}
	return res, l.lateGrant(sent, ttl)
}

// groupFailed is the end of the call after a group's attempt failed, or
// nil when LockAll goes on with the keys one at a time.
func (m *multi) groupFailed(err error) error {
	if errors.Is(err, ErrInvalid) {
		return err
	}
	if e := m.ctx.Err(); e != nil {
		return errors.Join(ErrNotAcquired, e, unavailable(lastErrIf(err, m.ctx)))
	}
	err = unavailable(err)
	m.l.tel.attemptFailed(m.span, err)
	if !m.wait {
		return err
	}
	return nil
}

// takeGrants makes each grant a Lock of the call, watched by the renewer.
func (m *multi) takeGrants(keys []string, owner string, res []acquireResult, sent time.Time) error {
	l := m.l
	for i, k := range keys {
		lk := newLock(m.caller, l, k, k, owner, res[i].token, &m.lc, sent)
		lk.handle = res[i].handle
		if err := l.renew.add(lk); err != nil { // Close came first: it releases none of these
			lk.finish(ErrReleased, "")
			m.releaseGrants(keys[i:], owner, res[i:])
			return err
		}
		m.locks = append(m.locks, lk)
	}
	return nil
}

// releaseGrants releases grants that Close did not see, before the call
// returns.
func (m *multi) releaseGrants(keys []string, owner string, res []acquireResult) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.caller), cleanupTimeout)
	defer cancel()
	for i, k := range keys {
		ls := backend.Lease{Key: k, Owner: owner, Token: res[i].token, TTL: m.lc.ttl, Drift: m.l.drift(m.lc.ttl), Handle: res[i].handle}
		_, _ = m.l.drv.b.Release(ctx, ls)
	}
}

// fail gives back every key the call took, before it returns err.
func (m *multi) fail(err error) error {
	if uerr := m.unwind(); uerr != nil {
		err = errors.Join(err, uerr)
	}
	m.end(outcomeOf(m.ctx, err), err)
	return err
}

// unwind gives back the keys taken, the last first, on a context of its
// own: the caller's may have ended.
func (m *multi) unwind() error {
	if len(m.locks) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(m.caller), cleanupTimeout)
	defer cancel()
	var errs []error
	for i := len(m.locks) - 1; i >= 0; i-- {
		if err := m.locks[i].giveBack(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	m.locks = nil
	return errors.Join(errs...)
}

// giveBack undoes a LockAll's acquisition of lk: a re-entry through the
// context counts down; a lock of the call's own is released now, unless
// Close has taken it over, which releases it (giveBack waits for that).
func (lk *Lock) giveBack(ctx context.Context) error {
	lk.mu.Lock()
	if lk.count > 1 {
		lk.count--
		lk.mu.Unlock()
		return nil
	}
	lk.mu.Unlock()
	if !lk.l.renew.claim(lk) {
		select {
		case <-lk.ctx.Done():
		case <-ctx.Done():
		}
		return nil
	}
	if err := lk.Release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
		return err
	}
	return nil
}

func (m *multi) succeed() *Locks {
	ls := newLocks(m.caller, m.l, m.locks)
	outcome := "acquired"
	if m.reentered == len(m.locks) {
		outcome = "reentered"
	}
	m.end(outcome, nil)
	return ls
}

// end records the call's outcome on its span and metrics, as a Lock call's.
func (m *multi) end(outcome string, err error) {
	wait := time.Since(m.start)
	if m.span.IsRecording() {
		m.span.SetAttributes(attrWait.Float64(wait.Seconds()))
	}
	endSpan(m.span, outcome, err)
	bg := context.Background()
	o := m.l.tel.outcomeAttrs(outcome)
	m.l.tel.acquireDur.Record(bg, wait.Seconds(), o.record...)
	m.l.tel.acquired.Add(bg, 1, o.add...)
}

// groupEvent records a group's attempt on the call's span.
func (m *multi) groupEvent(keys int, outcome string) {
	if m.span.IsRecording() {
		m.span.AddEvent("redfence.group", trace.WithAttributes(attrKeys.Int(keys), attrOutcome.String(outcome)))
	}
}

// outcomeOf names a failed call's outcome as Lock's are named.
func outcomeOf(ctx context.Context, err error) string {
	var rerr *ReplicaAckError
	switch {
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, ErrInvalid):
		return "invalid"
	case ctx.Err() != nil:
		return "timeout"
	case errors.As(err, &rerr):
		return "replica_ack"
	case errors.Is(err, ErrUnavailable):
		return "error"
	case errors.Is(err, ErrNotAcquired):
		return "contended"
	}
	return "error"
}

// waitedFor reports whether a call of this Locker waits for any of keys.
func (l *Locker) waitedFor(keys []string) bool {
	if l.waiters.Load() == 0 {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range keys {
		if q := l.queues[k]; q != nil && len(q.waiters) > 0 {
			return true
		}
	}
	return false
}
