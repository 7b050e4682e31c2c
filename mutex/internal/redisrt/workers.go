package redisrt

import "slices"

// maxIdleWorkers bounds the goroutines a Runner keeps parked for reuse.
const maxIdleWorkers = 16

// Go runs fn in a goroutine the Runner owns (Close waits for it), reusing a
// parked one when there is one: a new goroutine starts with a small stack
// and grows it, copying, on its way down go-redis's call path, which
// Redlock, with a call per node, would pay on every Lock. Once Close has
// begun, fn runs on the caller's goroutine before Go returns.
func (r *Runner) Go(fn func()) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		fn()
		return
	}
	if n := len(r.idle); n > 0 {
		w := r.idle[n-1]
		r.idle = r.idle[:n-1]
		r.mu.Unlock()
		w <- fn // buffered: never blocks
		return
	}
	r.bg.Add(1) // under mu: never concurrent with Close's Wait
	r.mu.Unlock()
	go r.worker(fn) // owned by the Runner: Close waits (r.bg)
}

// worker runs fn, then parks for the next task until the Runner closes or
// enough others are parked.
func (r *Runner) worker(fn func()) {
	defer r.bg.Done()
	var tasks chan func()
	for {
		fn()
		if tasks == nil {
			tasks = make(chan func(), 1)
		}
		r.mu.Lock()
		if r.closed || len(r.idle) >= maxIdleWorkers {
			r.mu.Unlock()
			return
		}
		r.idle = append(r.idle, tasks)
		r.mu.Unlock()
		select {
		case fn = <-tasks:
		case <-r.done:
			r.mu.Lock()
			i := slices.Index(r.idle, tasks)
			if i >= 0 {
				r.idle = slices.Delete(r.idle, i, i+1)
			}
			r.mu.Unlock()
			if i >= 0 {
				return
			}
			fn = <-tasks // handed a task just before: run it, then leave
		}
	}
}
