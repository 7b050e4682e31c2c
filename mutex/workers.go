package mutex

import (
	"slices"
	"sync"
)

// maxIdleWorkers bounds the goroutines a Locker keeps for reuse.
const maxIdleWorkers = 16

// workers are the Locker's reusable background goroutines (see goBg).
type workers struct {
	mu   sync.Mutex    // a leaf: taken under Locker.mu, takes nothing
	idle []chan func() // parked workers, each waiting on its own channel
}

// goBg runs fn in a goroutine the Locker owns (Close waits for it, through
// l.bg), reusing a parked one when there is one: a new goroutine starts with
// a small stack and grows it, copying, on its way down go-redis's call path,
// which Redlock, with a call per node, would pay on every Lock.
func (l *Locker) goBg(fn func()) {
	l.work.mu.Lock()
	if n := len(l.work.idle); n > 0 {
		w := l.work.idle[n-1]
		l.work.idle = l.work.idle[:n-1]
		l.work.mu.Unlock()
		w <- fn // buffered: never blocks
		return
	}
	l.work.mu.Unlock()
	l.bg.Add(1)
	go l.worker(fn) // owned by the Locker: Close waits (l.bg)
}

// worker runs fn, then parks for the next task until the Locker closes or
// enough others are parked.
func (l *Locker) worker(fn func()) {
	defer l.bg.Done()
	var tasks chan func()
	for {
		fn()
		select {
		case <-l.done:
			return
		default:
		}
		if tasks == nil {
			tasks = make(chan func(), 1)
		}
		l.work.mu.Lock()
		if len(l.work.idle) >= maxIdleWorkers {
			l.work.mu.Unlock()
			return
		}
		l.work.idle = append(l.work.idle, tasks)
		l.work.mu.Unlock()
		select {
		case fn = <-tasks:
		case <-l.done:
			l.work.mu.Lock()
			i := slices.Index(l.work.idle, tasks)
			if i >= 0 {
				l.work.idle = slices.Delete(l.work.idle, i, i+1)
			}
			l.work.mu.Unlock()
			if i >= 0 {
				return
			}
			fn = <-tasks // handed a task just before: run it, then leave
		}
	}
}
