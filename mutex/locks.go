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
// context and one Release. Its methods are safe for concurrent use; methods
// on a nil or released Locks return ErrNotHeld.
type Locks struct {
	l      *Locker
	locks  []*Lock // one per key, in the order taken
	values locksValues
	ctx    context.Context
	cancel context.CancelCauseFunc
	stops  []func() bool // end the watch of each key's lock context

	mu       sync.Mutex // a leaf
	released bool       // Release began
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

// TokenOf returns key's fencing token (Lock.Token), or 0 when key is not
// one of the set: what a write to key's own resource carries.
func (ls *Locks) TokenOf(key string) int64 {
	if ls == nil {
		return 0
	}
	return ls.lock(key).Token()
}

// Token returns the largest of the keys' tokens (Hold). It fences a
// resource guarded by this same set of keys as a whole: each key's token
// grows with every acquisition, so the largest of a later LockAll of the
// same keys is larger. A resource of one key takes TokenOf(key).
func (ls *Locks) Token() int64 {
	if ls == nil {
		return 0
	}
	var t int64
	for _, lk := range ls.locks {
		t = max(t, lk.Token())
	}
	return t
}

// Deadline returns the earliest of the keys' local lease deadlines: the
// set's context ends with ErrLockLost then unless renewals succeed first.
func (ls *Locks) Deadline() time.Time {
	if ls == nil {
		return time.Time{}
	}
	var d time.Time
	for _, lk := range ls.locks {
		if t := lk.Deadline(); d.IsZero() || t.Before(d) {
			d = t
		}
	}
	return d
}

// Context is done when any key is lost (ErrLockLost) or released
// (ErrReleased), the cause naming the key. It carries the values of the ctx
// given to LockAll; passing it to Lock or LockAll re-enters its keys.
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

// Extend sets every key's lease to ttl from now in one call to the backend.
// A key no longer held makes it return ErrNotHeld and end the context with
// ErrLockLost; the other keys are extended all the same. On a store error
// the keys it did not answer for keep their deadline.
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

// Release takes one count of every key, as Lock.Release does for each, and
// ends the context with ErrReleased. It releases every key it still holds
// even when one was lost, and then returns ErrNotHeld; store errors are
// joined. A second Release returns ErrNotHeld.
func (ls *Locks) Release(ctx context.Context) error {
	if err := ls.begin(ctx); err != nil {
		return err
	}
	for _, stop := range ls.stops {
		stop()
	}
	ctx, span := ls.l.tel.startKeysSpan(ctx, "redfence.ReleaseAll", len(ls.locks))
	var errs []error
	var lost error
	for _, lk := range slices.Backward(ls.locks) {
		switch err := lk.Release(ctx); {
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
