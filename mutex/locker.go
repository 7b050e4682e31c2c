package mutex

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redfence/redfence/mutex/internal/workers"
)

// MaxKeyLen bounds user keys, in bytes; Redis would take more, but a longer
// key is almost always a bug (a body used as a key).
const MaxKeyLen = 4096

// cleanupTimeout bounds the clean-up after a failed or abandoned attempt,
// which runs on its own context, never on the caller's dead one.
const cleanupTimeout = 2 * time.Second

// Locker hands out locks on keys of one backend: a Redis deployment
// (standalone, Sentinel or Cluster, New), Redlock's masters (NewRedlock),
// or any backend.Backend (NewWithBackend). It is safe for concurrent use.
// It owns background work (renewal, clean-ups, and the backend it built);
// Close stops it.
type Locker struct {
	drv driver
	cfg config
	err error // bad construction, returned by every call
	tel *telemetry

	held    atomic.Int64 // Locks of this Locker not yet released or lost
	waiters atomic.Int64 // calls in the local queues (queue.go); an Unlock with none looks for no one to hand off to or wake

	id          string        // this Locker's id in the backend's waiting queues
	ownerSuffix string        // "@" and the OwnerInfo, ending every owner id it makes
	done        chan struct{} // closed by Close
	renew       *renewer
	work        *workers.Pool // clean-ups; Close waits for them

	// Lock order: mu, then the pool's. mu is never held while calling into
	// the backend or renew, which call back into the Locker (wakeLocal)
	// under their own mutexes released first; a Lock's mu is never taken
	// under it.
	mu     sync.Mutex // guards closed, queues and the queues' waiters
	closed bool
	queues map[string]*queue
}

// newLocker is the local machinery every backend shares; the caller sets
// the backend.
func newLocker(opts []Option) *Locker {
	l := &Locker{
		cfg:    newConfig(opts),
		done:   make(chan struct{}),
		queues: map[string]*queue{},
		work:   workers.New(),
	}
	l.err = l.cfg.err
	l.ownerSuffix = encodeOwnerInfo(l.cfg.info)
	if len(l.ownerSuffix) > maxOwnerInfo && l.err == nil {
		l.err = invalid("OwnerInfo of %d bytes encoded exceeds %d", len(l.ownerSuffix), maxOwnerInfo)
	}
	l.id = l.newOwner()
	l.tel = newTelemetry(l.cfg.tp, l.cfg.mp)
	l.renew = newRenewer(l)
	return l
}

// Close stops renewal and the subscription, releases the locks this Locker
// still holds (their contexts end with ErrReleased), makes waiting Lock calls
// return ErrClosed, and waits for all its goroutines. Later calls return
// ErrClosed. It returns the release errors, if any.
//
// A Redlock Locker's release takes at most twice the node timeout, however
// many locks it holds and however hung a node. Waiting for its goroutines
// also waits for calls already sent to a hung node: a client without
// ContextTimeoutEnabled ends them only at its ReadTimeout (go-redis's
// default is 5s in v9.23), one with it at the call's deadline. A backend
// given to NewWithBackend is not closed: it is the caller's.
func (l *Locker) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()

	held := l.renew.stop()
	var errs []error
	if len(held) > 0 && l.err == nil {
		if err := l.releaseAll(held); err != nil {
			errs = append(errs, err)
		}
		for _, lk := range held {
			lk.finish(ErrReleased, "")
		}
	}
	l.renew.halt()
	l.work.Close()
	if l.drv.own != nil {
		if err := l.drv.own.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// now is the Locker's clock (WithClock).
func (l *Locker) now() time.Time { return l.cfg.now() }

// Err returns the construction error (wrapping ErrInvalid) that every call
// of the Locker returns, or nil. Adapters use it to report a bad Locker when
// they are built rather than while serving.
func (l *Locker) Err() error {
	if l == nil {
		return invalid("nil Locker")
	}
	return l.err
}

func (l *Locker) check(ctx context.Context, key string) error {
	switch {
	case l == nil:
		return invalid("nil Locker")
	case l.err != nil:
		return l.err
	case ctx == nil:
		return invalid("nil context")
	case key == "":
		return invalid("empty key")
	case len(key) > MaxKeyLen:
		return invalid("key of %d bytes exceeds %d", len(key), MaxKeyLen)
	}
	return nil
}

// afterward runs fn in the background, owned by the Locker (Close waits for
// it), on its own bounded context, never on the caller's dead one. A
// backend orders what fn sends after the calls it stopped waiting for.
func (l *Locker) afterward(fn func(ctx context.Context)) {
	l.work.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		fn(ctx)
	})
}

// retryRelease tries once more to release a lock whose Unlock failed on the
// server.
func (l *Locker) retryRelease(lk *Lock) {
	l.afterward(func(ctx context.Context) {
		if _, err := l.release(ctx, lk); err == nil {
			l.wakeLocal(lk.key)
		}
	})
}

// KeyName is key's name in the backend, the Locker's prefix on it, as a
// backend's methods receive it: what packages built on the Locker (election)
// give a backend's optional capabilities for the same key.
func (l *Locker) KeyName(key string) string {
	if l == nil {
		return key
	}
	return l.name(key)
}

// ClockDrift is the margin the Locker takes off a lease of ttl for
// clock-rate differences (WithClockDrift): a holder's local deadline is the
// lease's start plus ttl minus it. Packages that time their own work inside
// a lease (election's renew deadline) keep within it.
func (l *Locker) ClockDrift(ttl time.Duration) time.Duration {
	if l == nil {
		return 0
	}
	return l.drift(ttl)
}
