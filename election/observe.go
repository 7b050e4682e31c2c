package election

import (
	"context"
	"errors"
	"time"
)

// observeWait bounds one blocking read of the journal: how long an observer
// takes to notice a cut connection at most, beside ctx.
const observeWait = 2 * time.Second

// Observe returns a channel of the election's terms, in increasing term
// order, never a lower term after a higher one; it is closed when ctx ends
// (or at once for bad input). It first sends the current leader, if any,
// then each term as it begins. Sends wait for the reader: a slow reader
// delays the observer, it loses nothing the journal still holds.
//
// With a term journal (one Redis deployment) it sees every term Campaign
// returned while connected; after a disconnect it resumes from the journal
// (which keeps the latest terms) and so sends the current one. Without a
// journal (Redlock) it polls Leader every retry period and misses terms
// shorter than that; it sends the current leader after a reconnect. The
// end of a term is not sent: Leader tells whether anyone leads now.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	if e == nil || ctx == nil {
		close(ch)
		return ch
	}
	go func() {
		defer close(ch)
		o := observer{e: e, ch: ch}
		if e.j != nil {
			o.journal(ctx)
		} else {
			o.poll(ctx)
		}
	}()
	return ch
}

type observer struct {
	e    *Election
	ch   chan<- Leader
	last int64 // the highest term sent or skipped
}

// send sends ld when its term is above every one sent; false when ctx
// ended.
func (o *observer) send(ctx context.Context, ld Leader) bool {
	if ld.Term <= o.last {
		return true
	}
	select {
	case o.ch <- ld:
		o.last = ld.Term
		return true
	case <-ctx.Done():
		return false
	}
}

// poll sends the leader Leader finds, every retry period.
func (o *observer) poll(ctx context.Context) {
	for {
		if ld, err := o.e.Leader(ctx); err == nil && !o.send(ctx, ld) {
			return
		}
		if sleep(ctx, o.e.cfg.retry) != nil {
			return
		}
	}
}

// journal sends the current leader, then each term the journal records.
func (o *observer) journal(ctx context.Context) {
	for !o.sync(ctx) {
		if sleep(ctx, o.e.cfg.retry) != nil {
			return
		}
	}
	for ctx.Err() == nil {
		recs, err := o.e.j.Terms(ctx, o.e.key, o.last, observeWait)
		if err != nil {
			if sleep(ctx, o.e.cfg.retry) != nil {
				return
			}
			continue
		}
		for _, r := range recs {
			if r.Owner == "" && r.Resigned && r.Term > o.last {
				o.last = r.Term // a resignation whose start the journal no longer has
				continue
			}
			if !o.send(ctx, Leader{Value: r.Value, Term: r.Term, Since: r.At}) {
				return
			}
		}
	}
}

// sync sends the current leader, or, with none, starts after the last
// term journaled; false when it could not read. The last term is read
// first: a term journaled after it is above it, and Terms reads it.
func (o *observer) sync(ctx context.Context) bool {
	last, ok, err := o.e.j.LastTerm(ctx, o.e.key)
	if err != nil {
		return false
	}
	ld, err := o.e.Leader(ctx)
	if errors.Is(err, errors.ErrUnsupported) && ok && !last.Resigned {
		// No inspection to confirm the holder: the last term, unless resigned.
		ld, err = Leader{Value: last.Value, Term: last.Term, Since: last.At}, nil
	}
	switch {
	case err == nil:
		o.send(ctx, ld) // a ctx ended meanwhile ends the caller's loop
		return true
	case !errors.Is(err, ErrNoLeader) && !errors.Is(err, errors.ErrUnsupported):
		return false
	}
	if ok {
		o.last = max(o.last, last.Term)
	}
	return true
}
