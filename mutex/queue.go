package mutex

// queue holds the goroutines of one Locker waiting for one key, in arrival
// order. Only the head talks to Redis; the others wait for their turn.
type queue struct {
	waiters    []*waiter
	subscribed bool   // the head subscribed to the key's release channel
	channel    string // that channel
}

type waiter struct {
	turn  chan struct{} // closed when this waiter becomes the head
	wake  chan struct{} // a release was seen; buffered, holds one signal
	quiet bool          // became head as a local goroutine acquired: expect a release first
}

// enqueue appends a waiter for key. A TryLock (wait false) behind local
// waiters gets ErrNotAcquired without asking Redis: they were first.
func (l *Locker) enqueue(key string, wait bool) (*waiter, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, ErrClosed
	}
	q := l.queues[key]
	if q == nil {
		q = &queue{}
		l.queues[key] = q
	} else if !wait && len(q.waiters) > 0 {
		return nil, ErrNotAcquired
	}
	w := &waiter{turn: make(chan struct{}), wake: make(chan struct{}, 1)}
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		close(w.turn)
	}
	return w, nil
}

// dequeue removes w. If w was the head, the next waiter becomes head; when w
// just acquired the lock, that waiter waits for the release before trying.
// The last waiter out drops the subscription.
func (l *Locker) dequeue(key string, w *waiter, acquired bool) {
	if w == nil {
		return
	}
	l.mu.Lock()
	q := l.queues[key]
	if q == nil {
		l.mu.Unlock()
		return
	}
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			next := q.waiters[0]
			next.quiet = acquired
			close(next.turn)
		}
		break
	}
	var unsubscribe string
	if len(q.waiters) == 0 {
		delete(l.queues, key)
		if q.subscribed {
			unsubscribe = q.channel
		}
	}
	l.mu.Unlock()
	if unsubscribe != "" {
		l.subs.remove(unsubscribe)
	}
}

// wakeLocal signals the head waiting for key, if any; it never blocks.
func (l *Locker) wakeLocal(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.queues[key]; q != nil && len(q.waiters) > 0 {
		select {
		case q.waiters[0].wake <- struct{}{}:
		default:
		}
	}
}
