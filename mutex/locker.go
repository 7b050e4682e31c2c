package mutex

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redfence/redfence/internal/workers"
)

// MaxKeyLen bounds user keys, in bytes; Redis would take more, but a longer
// key is almost always a bug (a body used as a key).
const MaxKeyLen = 4096

// cleanupTimeout bounds the clean-up after a failed or abandoned attempt,
// which runs on its own context, never on the caller's dead one.
const cleanupTimeout = 2 * time.Second

// Locker hands out locks on keys of one backend (New). It is safe for
// concurrent use. It owns background work (renewal, clean-ups) and the
// backend; Close stops and closes them.
type Locker struct {
	drv driver
	cfg config
	tel *telemetry

	held    atomic.Int64 // Locks of this Locker not yet released or lost
	waiters atomic.Int64 // calls in the local queues (queue.go); a Release with none looks for no one to hand off to or wake

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
func newLocker(opts []Option) (*Locker, error) {
	l := &Locker{
		cfg:    newConfig(opts),
		done:   make(chan struct{}),
		queues: map[string]*queue{},
		work:   workers.New(),
	}
	if l.cfg.err != nil {
		return nil, l.cfg.err
	}
	l.ownerSuffix = encodeOwnerInfo(l.cfg.info)
	if len(l.ownerSuffix) > maxOwnerInfo {
		return nil, invalid("OwnerInfo of %d bytes encoded exceeds %d", len(l.ownerSuffix), maxOwnerInfo)
	}
	l.id = l.newOwner()
	l.tel = newTelemetry(l.cfg.tp, l.cfg.mp)
	l.tel.renewalSpans = l.cfg.renewSpans
	l.renew = newRenewer(l)
	return l, nil
}

// Close stops renewal, releases the holds this Locker still has (their
// contexts end with ErrReleased), makes waiting calls return ErrClosed,
// waits for all its goroutines and closes the backend when it is an
// io.Closer. Later calls return ErrClosed. It returns the release errors,
// if any.
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
	if len(held) > 0 {
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

func (l *Locker) check(ctx context.Context, key string) error {
	switch {
	case l == nil:
		return invalid("nil Locker")
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

// retryRelease tries once more to release a lock whose Release failed on the
// server.
func (l *Locker) retryRelease(lk *Lock) {
	l.afterward(func(ctx context.Context) {
		if _, err := l.release(ctx, lk); err == nil {
			l.wakeLocal(lk.key)
		}
	})
}

// ClockDrift is the margin the Locker takes off a lease of ttl
// (WithClockDrift), for packages that time their own work inside a lease.
func (l *Locker) ClockDrift(ttl time.Duration) time.Duration {
	if l == nil {
		return 0
	}
	return l.drift(ttl)
}
