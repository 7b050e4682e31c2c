// Package workers is a pool of reusable goroutines that its owner waits
// for: the Locker's clean-ups and a Redis driver's calls. A new goroutine
// starts with a small stack and grows it, copying, on its way down
// go-redis's call path, which Redlock, with a call per node, would pay on
// every Lock; a parked one has grown already.
package workers

import (
	"slices"
	"sync"
)

// maxIdle bounds the goroutines a Pool keeps parked for reuse.
const maxIdle = 16

// Pool owns the goroutines Go starts; Close waits for them. The zero Pool
// is not usable: New makes one. Lock order: mu is a leaf.
type Pool struct {
	done chan struct{}  // closed by Close: parked workers leave
	bg   sync.WaitGroup // every goroutine started by Go

	mu     sync.Mutex
	closed bool
	idle   []chan func() // parked workers, each waiting on its own channel
}

// New returns an open Pool.
func New() *Pool { return &Pool{done: make(chan struct{})} }

// Go runs fn in a goroutine the Pool owns, reusing a parked one when there
// is one. Once Close has begun, fn runs on the caller's goroutine before Go
// returns: nothing outlives Close.
func (p *Pool) Go(fn func()) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		fn()
		return
	}
	if n := len(p.idle); n > 0 {
		w := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		w <- fn // buffered: never blocks
		return
	}
	p.bg.Add(1) // under mu: never concurrent with Close's Wait
	p.mu.Unlock()
	go p.worker(fn) // owned by the Pool: Close waits (p.bg)
}

// worker runs fn, then parks for the next task until the Pool closes or
// enough others are parked.
func (p *Pool) worker(fn func()) {
	defer p.bg.Done()
	var tasks chan func()
	for {
		fn()
		if tasks == nil {
			tasks = make(chan func(), 1)
		}
		p.mu.Lock()
		if p.closed || len(p.idle) >= maxIdle {
			p.mu.Unlock()
			return
		}
		p.idle = append(p.idle, tasks)
		p.mu.Unlock()
		select {
		case fn = <-tasks:
		case <-p.done:
			p.mu.Lock()
			i := slices.Index(p.idle, tasks)
			if i >= 0 {
				p.idle = slices.Delete(p.idle, i, i+1)
			}
			p.mu.Unlock()
			if i >= 0 {
				return
			}
			fn = <-tasks // handed a task just before: run it, then leave
		}
	}
}

// Close makes parked workers leave and waits for every goroutine Go
// started; later calls of Go run their fn inline. Twice is fine.
func (p *Pool) Close() {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.done)
	}
	p.mu.Unlock()
	p.bg.Wait()
}

// Closed reports whether Close has begun.
func (p *Pool) Closed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closed
}

// Idle counts the parked workers.
func (p *Pool) Idle() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.idle)
}
