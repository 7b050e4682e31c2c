package election

import (
	"context"
	"errors"
	"time"
)

// resignTimeout bounds the Term.Release that Run makes after fn returned,
// on a context of its own (Run's may have ended).
const resignTimeout = 5 * time.Second

// Run campaigns with value and runs fn as leader, with the term's context,
// until ctx ends or fn returns while its term lasts:
//
//   - fn returns while the term lasts: Run resigns and returns fn's error
//     (nil included).
//   - the term ends (lost, renew deadline): Run waits for fn to return,
//     releases the lock and campaigns again. fn's error then is taken for
//     the consequence of the loss and dropped.
//   - ctx ends: the term ends with a cause matching ErrStopped; Run waits
//     for fn, resigns and returns nil. A Campaign cut short returns nil.
//
// Between the end of a term and fn's return the lock is no longer renewed,
// nor released: no other candidate leads until fn returned or the lease
// ran out, whichever is first. An fn that honours its context therefore
// never overlaps another candidate's (it has the lease minus the renew
// deadline to return); one that ignores it may, and only the fence of its
// writes (Term.Token through package fenced) keeps those writes out. Other
// errors (bad input, a closed Locker) are returned.
func (e *Election) Run(ctx context.Context, value string, fn func(ctx context.Context, t *Term) error) error {
	if err := e.checkCall(ctx, value); err != nil {
		return err
	}
	if fn == nil {
		return invalid("nil fn")
	}
	for {
		t, err := e.Campaign(ctx, value)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		done, err := e.lead(ctx, t, fn)
		if done || ctx.Err() != nil {
			return err
		}
	}
}

// lead runs fn in the term t and releases it after fn returned; done is true
// when fn returned while the term lasted (Run returns err then).
func (e *Election) lead(ctx context.Context, t *Term, fn func(context.Context, *Term) error) (done bool, err error) {
	stop := context.AfterFunc(ctx, func() { t.cancel(&stoppedError{context.Cause(ctx)}) })
	err = fn(t.ctx, t)
	stop()
	done = t.ctx.Err() == nil
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resignTimeout)
	defer cancel()
	rerr := t.Release(rctx)
	if !done {
		return false, nil
	}
	return true, errors.Join(err, rerr)
}
