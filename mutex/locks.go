package mutex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redfence/redfence/mutex/backend"
)

// Locks is a set of keys held as one lock (LockAll): each key has its own
// lock and fencing token, as Lock would have given it; the set has one
// context and one Unlock. Its methods are safe for concurrent use; methods
// on a nil or released Locks return ErrNotHeld.
type Locks struct {
	l      *Locker
	locks  []*Lock // one per key, in the order taken
	values locksValues
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool // end the watch of each key's lock context

	mu       sync.Mutex // a leaf
	released bool       // Unlock began
}

// locksValues is the parent of a Locks' context: the values of the ctx
// given to LockAll, and each key's lock under heldKey, so that
// Lock(ls.Context(), key) and LockAll(ls.Context(), keys) re-enter.
type locksValues struct {
	parent context.Context
	ls     *Locks
}

func (c *locksValues) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *locksValues) Done() <-chan struct{}       { return nil }
func (c *locksValues) Err() error                  { return nil }
func (c *locksValues) String() string              { return "redfence.locksValues" }

func (c *locksValues) Value(key any) any {
	if k, ok := key.(heldKey); ok && k.l == c.ls.l {
		if lk := c.ls.lock(k.key); lk != nil {
			return lk
		}
	}
	return c.parent.Value(key)
}

// newLocks holds locks as one: the Locks' context ends when any of theirs
// does, with its cause and key.
func newLocks(caller context.Context, l *Locker, locks []*Lock) *Locks {
	ls := &Locks{l: l, locks: locks, stops: make([]func() bool, len(locks))}
	ls.values = locksValues{parent: caller, ls: ls}
	ls.ctx, ls.cancel = context.WithCancelCause(&ls.values)
	for i, lk := range locks {
		ls.stops[i] = context.AfterFunc(lk.ctx, func() { ls.cancel(keyCause(lk)) })
	}
	for _, lk := range locks {
		if lk.ctx.Err() != nil { // lost while the call waited for later keys: ended at once
			ls.cancel(keyCause(lk))
			break
		}
	}
	return ls
}

// keyCause is why lk's context ended, naming its key: errors.Is matches
// ErrLockLost or ErrReleased.
func keyCause(lk *Lock) error {
	return fmt.Errorf("%w: key %q", context.Cause(lk.ctx), lk.key)
}

func (ls *Locks) lock(key string) *Lock {
	for _, lk := range ls.locks {
		if lk.key == key {
			return lk
		}
	}
	return nil
}

// Keys returns the keys held, without duplicates, in the order they were
// taken (see LockAll). The slice is a copy.
func (ls *Locks) Keys() []string {
	if ls == nil {
		return nil
	}
	keys := make([]string, len(ls.locks))
	for i, lk := range ls.locks {
		keys[i] = lk.key
	}
	return keys
}

// Token returns key's fencing token (Lock.Token), or 0 when key is not one
// of the set.
func (ls *Locks) Token(key string) int64 {
	if ls == nil {
		return 0
	}
	return ls.lock(key).Token()
}

// Context is done when any key is lost (cause matching ErrLockLost) or
// released (ErrReleased: Unlock, or Close); the cause names the key. Work
// done under the locks should use it. It carries the values of the ctx given
// to LockAll, and passing it (or a context derived from it) to Lock or
// LockAll re-enters the keys it holds.
func (ls *Locks) Context() context.Context {
	if ls == nil {
		return (*Lock)(nil).Context()
	}
	return ls.ctx
}

// Join is Lock.Join for the set: a context that ends when ctx ends or any
// key is lost or released, whichever comes first.
func (ls *Locks) Join(ctx context.Context) (context.Context, context.CancelFunc) {
	return join(ls.Context(), ctx)
}

// Extend sets every key's lease to ttl from now (and the TTL of later
// renewals), in one call to the backend. On success returns nil. When a
// key is no longer held returns ErrNotHeld and the context ends with
// ErrLockLost; the other keys are extended all the same. On a server error
// returns it; the keys it did not answer for keep their lease deadline.
func (ls *Locks) Extend(ctx context.Context, ttl time.Duration) error {
	if err := ls.usable(ctx); err != nil {
		return err
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	ttl = ttl.Truncate(time.Millisecond)
	l := ls.l
	ctx, span := l.tel.startKeysSpan(ctx, "redfence.ExtendAll", len(ls.locks))
	ttls := make([]time.Duration, len(ls.locks))
	for i := range ttls {
		ttls[i] = ttl
	}
	res, sent, why := l.extend(ctx, ls.locks, ttls)
	gone, unknown := false, false
	for i, lk := range ls.locks {
		switch res[i] {
		case backend.Renewed:
			lk.renewed(sent, ttl)
		case backend.Gone:
			lk.lose("extend found the lock gone")
			gone = true
		default:
			unknown = true
		}
	}
	switch {
	case gone:
		endSpan(span, "not_held", ErrNotHeld)
		return ErrNotHeld
	case unknown:
		if why == nil {
			why = unavailable(errNoAnswer)
		}
		endSpan(span, "error", why)
		return why
	}
	endSpan(span, "extended", nil)
	return nil
}

// Unlock takes one count of every key, as Lock.Unlock does for each (a key
// re-entered through a context only counts down), and ends the context with
// ErrReleased. It releases every key it still holds even when one was
// lost: then it returns ErrNotHeld. A server error is returned, joined
// with the others; that key is given up locally and its release retried in
// the background, as Lock.Unlock does. A second Unlock returns ErrNotHeld
// and changes nothing.
func (ls *Locks) Unlock(ctx context.Context) error {
	if err := ls.begin(ctx); err != nil {
		return err
	}
	for _, stop := range ls.stops {
		stop()
	}
	ctx, span := ls.l.tel.startKeysSpan(ctx, "redfence.UnlockAll", len(ls.locks))
	var errs []error
	var lost error
	for _, lk := range slices.Backward(ls.locks) {
		switch err := lk.Unlock(ctx); {
		case errors.Is(err, ErrNotHeld):
			if lost == nil {
				lost = keyCause(lk)
			}
		case err != nil:
			errs = append(errs, err)
		}
	}
	cause := error(ErrReleased)
	if lost != nil {
		cause = lost
		errs = append(errs, ErrNotHeld)
	}
	ls.cancel(cause)
	err := errors.Join(errs...)
	switch {
	case err == nil:
		endSpan(span, "released", nil)
	case lost != nil:
		endSpan(span, "not_held", err)
	default:
		endSpan(span, "error", err)
	}
	return err
}

// begin marks the set released, once.
func (ls *Locks) begin(ctx context.Context) error {
	return ls.guard(ctx, func() error {
		if ls.released {
			return ErrNotHeld
		}
		ls.released = true
		return nil
	})
}

// usable refuses a released set, or one whose context ended (a key lost):
// its keys are extended no more.
func (ls *Locks) usable(ctx context.Context) error {
	return ls.guard(ctx, func() error {
		if ls.released || ls.ctx.Err() != nil {
			return ErrNotHeld
		}
		return nil
	})
}

// guard refuses a nil set or ctx, then runs check under ls.mu.
func (ls *Locks) guard(ctx context.Context, check func() error) error {
	if ls == nil || ls.l == nil {
		return ErrNotHeld
	}
	if ctx == nil {
		return invalid("nil context")
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return check()
}
