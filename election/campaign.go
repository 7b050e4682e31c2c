package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// Campaign blocks until this candidate leads the election with value (at
// most MaxValueLen bytes, readable by everyone through Leader and Observe)
// and returns its term, or until ctx ends: then it returns ctx.Err() joined
// with mutex.ErrNotAcquired and holds nothing.
//
// A term is the election's lock held: its number is the lock's fencing
// token, strictly greater than every earlier term's, so that a resource
// guarded by package fenced with Term.Token refuses a deposed leader's
// writes. The term's context ends when leadership ends, and the term keeps
// its lease renewed until then (every retry period; the term ends when no
// renewal succeeded for the renew deadline), never after: a leader whose
// work outlives its term loses the lock within a lease.
//
// With a term journal, Campaign returns only once its term is journaled
// (Observe sees every term Campaign returned); a lock won but refused by
// the journal, or lost before, is released and the campaign goes on. With
// WithLockDelay, a candidate that wins after an unclean loss holds the lock
// for the delay before its term begins. An outage (mutex.ErrUnavailable)
// is retried every retry period; bad input and a closed Locker return at
// once.
//
// The lock's owner id is "election.", a random part, "." and value, then
// the Locker's OwnerInfo as admin.OwnerID appends it: inspection reads the
// value and the leader's host and pid there. It is an explicit owner
// (mutex.WithOwner), so an acquisition whose outcome is unknown is not
// abandoned: what it may have taken runs out within a lease.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	if err := e.checkCall(ctx, value); err != nil {
		return nil, err
	}
	c := e.track(value)
	defer e.untrack(c)
	ctx, span := e.tel.startCampaign(ctx)
	start := time.Now()
	for {
		t, err := e.attempt(ctx, value)
		if err == nil {
			e.tel.endCampaign(ctx, span, start, t, nil)
			return t, nil
		}
		if fatal(ctx, err) || sleep(ctx, e.cfg.retry) != nil {
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				err = errors.Join(mutex.ErrNotAcquired, ctx.Err())
			}
			e.tel.endCampaign(ctx, span, start, nil, err)
			return nil, err
		}
	}
}

// attempt takes the lock once (waiting while it is held) and begins a term
// under it.
func (e *Election) attempt(ctx context.Context, value string) (*Term, error) {
	owner := e.newOwner(value)
	lk, err := e.l.Lock(ctx, e.key,
		mutex.WithTTL(e.cfg.lease),
		mutex.WithAutoRenew(false), // the term renews it, and stops when the term ends
		mutex.WithRetry(max(e.cfg.retry/8, time.Millisecond), e.cfg.retry),
		mutex.WithOwner(owner))
	if err != nil {
		return nil, err
	}
	t := newTerm(e, lk, value, owner)
	if err := e.begin(ctx, t); err != nil {
		t.abort()
		return nil, err
	}
	return t, nil
}

// begin waits out the lock-delay, journals the term and starts it.
func (e *Election) begin(ctx context.Context, t *Term) error {
	acquired := time.Now()
	prevEnd := acquired // a lost term's end is unknown: the lock freed about now
	if e.j != nil {
		last, ok, err := e.j.LastTerm(ctx, e.key)
		if err != nil {
			return fmt.Errorf("election: reading the term journal: %w", err)
		}
		if ok && last.Resigned && last.At.Before(prevEnd) {
			prevEnd = last.At
		}
		// No journal is no proof of a clean end: it expires 24 h after its
		// last entry and is lost with a server restarted empty, which also
		// frees the lock under a leader that still acts. So the lock-delay
		// applies, also to a new election's first term.
		if ok && last.Resigned {
			t.clean = true
		}
	}
	if err := e.lockDelay(ctx, t); err != nil {
		return err
	}
	if err := e.journal(ctx, t); err != nil {
		return err
	}
	// Journaled, the term has begun, even if it ended meanwhile: observers
	// see it, so its callbacks run and Campaign returns it (done).
	e.tel.leaderless(ctx, t.since.Sub(prevEnd))
	t.start()
	return nil
}

// journal records the term; the call ends with the lock too, so that a
// term lost before it was journaled never begins. Without a journal, a
// term lost already does not begin.
func (e *Election) journal(ctx context.Context, t *Term) error {
	t.since = time.Now().Truncate(time.Millisecond)
	if e.j == nil {
		if t.ctx.Err() != nil {
			return context.Cause(t.ctx)
		}
		return nil
	}
	jctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(t.ctx, cancel)
	defer func() { stop(); cancel() }()
	rec := backend.TermRecord{Term: t.Token(), Value: t.value, Owner: t.owner, At: t.since}
	ok, err := e.j.AppendTerm(jctx, e.key, rec)
	if err != nil {
		return fmt.Errorf("election: journaling term %d: %w", rec.Term, err)
	}
	if !ok {
		return fmt.Errorf("election: the journal holds a term at or above %d", rec.Term)
	}
	return nil
}

// lockDelay holds the lock for the configured delay when the last term
// ended uncleanly (or, without a journal, always).
func (e *Election) lockDelay(ctx context.Context, t *Term) error {
	if e.cfg.lockDelay <= 0 || t.clean {
		return nil
	}
	e.tel.lockDelayed(ctx)
	timer := time.NewTimer(e.cfg.lockDelay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-t.ctx.Done():
		return context.Cause(t.ctx)
	case <-ctx.Done():
		return errors.Join(mutex.ErrNotAcquired, ctx.Err())
	}
}

// sleep waits d or until ctx ends (its error).
func sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
