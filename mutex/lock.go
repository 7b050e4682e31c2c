package mutex

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex/backend"
)

// Lock is one held lock. Its methods are safe for concurrent use; methods on
// a nil, released or lost Lock return ErrNotHeld.
type Lock struct {
	l         *Locker
	key       string
	lockKey   string
	owner     string
	token     int64
	autoRenew bool
	acquired  time.Time
	values    lockValues // ctx's parent
	ctx       context.Context
	cancel    context.CancelCauseFunc
	handle    any      // the backend's own state of this lock, from its grant (nil: none)
	kind      holdKind // a permit or a read-write lock's hold; nil for a lock

	mu        sync.Mutex // after renewer.mu in the lock order; takes nothing under it
	count     int        // local re-entries through the context, plus one
	ttl       time.Duration
	deadline  time.Time     // local lease deadline
	nextRenew time.Time     // when the renewer extends it next
	retryAt   time.Time     // after a failed renewal: not before this
	done      bool          // released or lost
	renewals  int           // successful extensions (Held)
	renewRTT  time.Duration // the last one's round trip
}

type heldKey struct {
	l   *Locker
	key string
}

// lockValues is the parent of a lock's context: the values of the ctx given
// to Lock, never its cancellation or deadline (as context.WithoutCancel), and
// the lock itself under heldKey, so that Lock(lk.Context(), key) re-enters.
// It lives inside the Lock: one allocation fewer than WithoutCancel and
// WithValue would make (three, with the boxed key), on every Lock.
type lockValues struct {
	parent context.Context
	lk     *Lock
}

func (c *lockValues) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *lockValues) Done() <-chan struct{}       { return nil }
func (c *lockValues) Err() error                  { return nil }
func (c *lockValues) String() string              { return "redfence.lockValues" }

func (c *lockValues) Value(key any) any {
	switch k := key.(type) {
	case heldKey:
		if k.l == c.lk.l && k.key == c.lk.key && c.lk.kind == nil {
			return c.lk
		}
	case rwHeldKey:
		if k.l == c.lk.l && k.key == c.lk.key && familyOf(c.lk) == familyRW {
			return c.lk
		}
	}
	return c.parent.Value(key)
}

func newLock(caller context.Context, l *Locker, key, lockKey, owner string, token int64, lc *lockConfig, sent time.Time) *Lock {
	lk := &Lock{
		l: l, key: key, lockKey: lockKey, owner: owner, token: token,
		autoRenew: lc.autoRenew, acquired: time.Now(), count: 1, ttl: lc.ttl,
	}
	// The lock's context carries no caller cancellation, only the lock's own
	// lifetime; it keeps the caller's values (held locks, so that
	// Lock(lk.Context(), key) re-enters, and the caller's span, which work
	// under the lock is a child of: never the Lock call's own span, which
	// has ended by then).
	lk.values = lockValues{parent: caller, lk: lk}
	lk.ctx, lk.cancel = context.WithCancelCause(&lk.values)
	lk.mu.Lock()
	lk.deadline = sent.Add(lk.ttl - l.drift(lk.ttl))
	lk.nextRenew = sent.Add(lk.ttl / 3)
	lk.mu.Unlock()
	l.held.Add(1)
	l.tel.held.Add(context.Background(), 1)
	return lk
}

// drift is the margin for clock-rate differences between this process and
// Redis: by default 1% of the lease plus 2ms (a quarter of the lease for tiny
// leases); WithClockDrift sets it.
func (l *Locker) drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*l.cfg.driftFactor) + min(l.cfg.driftMin, ttl/4)
}

func heldIn(ctx context.Context, l *Locker, key string) *Lock {
	if l.held.Load() == 0 {
		return nil // no lock of this Locker to re-enter (and no boxing of the key)
	}
	lk, _ := ctx.Value(heldKey{l, key}).(*Lock)
	return lk
}

// Key returns the key the lock was taken on.
func (lk *Lock) Key() string {
	if lk == nil {
		return ""
	}
	return lk.key
}

// Token returns the fencing token: strictly greater than the token of
// every earlier acquisition of the same key; re-entries keep it. Pass it to
// the protected resource (package fenced) so that it refuses a stale
// holder's writes.
func (lk *Lock) Token() int64 {
	if lk == nil {
		return 0
	}
	return lk.token
}

// Context is done when the lock is lost (cause ErrLockLost) or released
// (ErrReleased). It carries the values of the ctx given to Lock; passing it
// (or a context derived from it) to Lock for the same key re-enters.
func (lk *Lock) Context() context.Context {
	if lk == nil {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(ErrNotHeld)
		return ctx
	}
	return lk.ctx
}

// Join returns a context for work done under the lock on behalf of ctx's
// caller: it carries the lock context's values and ctx's deadline, and is
// done when ctx is (cause: ctx's) or the lock is lost or released (cause:
// ErrLockLost or ErrReleased), whichever comes first. Call cancel when the
// work is over. A nil ctx joins nothing.
func (lk *Lock) Join(ctx context.Context) (context.Context, context.CancelFunc) {
	return join(lk.Context(), ctx)
}

// join is Join of a lock's context (a Lock's or a Locks') and ctx.
func join(lockCtx, ctx context.Context) (context.Context, context.CancelFunc) {
	jctx, cancel := context.WithCancelCause(lockCtx)
	if ctx == nil {
		return jctx, func() { cancel(context.Canceled) }
	}
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	cancelDeadline := context.CancelFunc(func() {})
	if dl, ok := ctx.Deadline(); ok {
		jctx, cancelDeadline = context.WithDeadline(jctx, dl)
	}
	return jctx, func() {
		cancelDeadline()
		stop()
		cancel(context.Canceled)
	}
}

// Deadline returns the local lease deadline, when the context ends with
// ErrLockLost unless a renewal or Extend succeeds first.
func (lk *Lock) Deadline() time.Time {
	if lk == nil {
		return time.Time{}
	}
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.deadline
}

// Extend sets the lease to ttl from now (and the TTL of later renewals). A
// lock no longer held returns ErrNotHeld, changes nothing in the store and
// ends the context with ErrLockLost; on a store error the deadline stays.
func (lk *Lock) Extend(ctx context.Context, ttl time.Duration) error {
	if err := lk.usable(ctx); err != nil {
		return err
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	ttl = ttl.Truncate(time.Millisecond)
	tel := lk.l.tel
	start := lk.l.now()
	var span trace.Span // only with WithRenewalSpans: see telemetry.renewal
	if tel.renewalSpans {
		ctx, span = tel.startSpan(ctx, "redfence.Extend", lk.key, lk.token)
	}
	res, sent, why := lk.l.extend(ctx, []*Lock{lk}, []time.Duration{ttl})
	outcome, err := "extended", error(nil)
	switch res[0] {
	case backend.Unknown:
		if why == nil {
			why = unavailable(errNoAnswer)
		}
		outcome, err = "error", why
	case backend.Gone:
		lk.lose("extend found the lock gone")
		outcome, err = "not_held", ErrNotHeld
	default:
		lk.renewed(sent, ttl)
	}
	if span != nil {
		tel.renewals.Add(ctx, 1, tel.outcomeAttrs(outcome).add...)
		endSpan(span, outcome, err)
	} else {
		tel.renewal(ctx, "redfence.Extend", lk.key, lk.token, start, outcome, err, err == nil && lateRenewal(lk.l.now().Sub(sent), ttl))
	}
	return err
}

// TTL returns the lease left as the backend sees it; a lock no longer held
// returns ErrNotHeld and ends the context with ErrLockLost.
func (lk *Lock) TTL(ctx context.Context) (time.Duration, error) {
	if err := lk.usable(ctx); err != nil {
		return 0, err
	}
	d, err := lk.l.drv.b.TTL(ctx, lease(lk))
	if err != nil {
		return 0, err
	}
	if d < 0 {
		lk.lose("ttl found the lock gone")
		return 0, ErrNotHeld
	}
	return d, nil
}

func (lk *Lock) usable(ctx context.Context) error {
	if lk == nil || lk.l == nil {
		return ErrNotHeld
	}
	if ctx == nil {
		return invalid("nil context")
	}
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.done {
		return ErrNotHeld
	}
	return nil
}

// leaseTTL is the lease the lock asks for at each renewal (WithTTL, or
// Extend's), which the renewer may change meanwhile.
func (lk *Lock) leaseTTL() time.Duration {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	return lk.ttl
}

// reenter counts one more holder through the context; false if the lock is
// no longer held.
func (lk *Lock) reenter() bool {
	lk.mu.Lock()
	defer lk.mu.Unlock()
	if lk.done {
		return false
	}
	lk.count++
	return true
}

// renewed moves the lease deadline after a successful extend sent at sent.
func (lk *Lock) renewed(sent time.Time, ttl time.Duration) {
	lk.mu.Lock()
	if lk.done {
		lk.mu.Unlock()
		return
	}
	lk.ttl = ttl
	lk.deadline = sent.Add(ttl - lk.l.drift(ttl))
	lk.nextRenew = sent.Add(ttl / 3)
	lk.retryAt = time.Time{}
	lk.renewals++
	lk.renewRTT = lk.l.now().Sub(sent)
	deadline := lk.deadline
	lk.mu.Unlock()
	lk.l.renew.watch(deadline) // an Extend to a shorter TTL moves it earlier
}

// lose ends a lock that is gone: its context is cancelled with ErrLockLost.
// Nothing is sent to Redis: the lock is never taken again behind the
// holder's back, and if it is still ours there the lease runs out.
func (lk *Lock) lose(reason string) { lk.finish(ErrLockLost, reason) }

// finish marks the lock done once, records it, and only then ends its
// context, so whoever watches the context sees the telemetry already there.
// It reports whether this call did it.
func (lk *Lock) finish(cause error, reason string) bool {
	lk.mu.Lock()
	if lk.done {
		lk.mu.Unlock()
		return false
	}
	lk.done = true
	lk.mu.Unlock()
	lk.l.renew.remove(lk)
	lk.l.held.Add(-1)
	held := time.Since(lk.acquired)
	if errors.Is(cause, ErrLockLost) {
		lk.l.tel.lost(lk.key, lk.token, reason, held)
	} else {
		ctx := context.Background()
		lk.l.tel.holdDur.Record(ctx, held.Seconds())
		lk.l.tel.held.Add(ctx, -1)
	}
	lk.cancel(cause)
	return true
}
