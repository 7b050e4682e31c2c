package mutex

import (
	"context"
	"time"
)

// subscribe asks the backend for key's release notifications, once per
// queue, and waits (briefly, bounded by ctx) for the server to confirm, so
// that a release after this returns is not missed. Without a confirmation in
// time the caller goes on: the fallback poll covers it.
func (l *Locker) subscribe(ctx context.Context, key, lockKey string) {
	l.subscribeWith(ctx, key, func() (<-chan struct{}, func()) { return l.watch(key, lockKey) })
}

// subscribeWith is subscribe with the watch of the local queue key (a
// lock's, or a semaphore's: Semaphore.watch). It reports whether this call
// subscribed: false when the queue was subscribed already or is gone.
func (l *Locker) subscribeWith(ctx context.Context, key string, watch func() (<-chan struct{}, func())) bool {
	l.mu.Lock()
	q := l.queues[key]
	if q == nil || q.subscribed {
		l.mu.Unlock()
		return false
	}
	q.subscribed = true
	l.mu.Unlock()

	ready, stop := watch() // not under l.mu: see the lock order
	l.mu.Lock()
	if l.queues[key] == q {
		q.unwatch, stop = stop, nil
	}
	l.mu.Unlock()
	if stop != nil { // every waiter left meanwhile
		stop()
		return true
	}
	if ready == nil {
		return true
	}
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
	case <-l.done:
	}
	return true
}
