package pgdriver

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// listener keeps one session that LISTENs on the table's channel and wakes
// the watches of each released key. It starts with the first Watch and
// reconnects after a lost session, waking every watch when it is lost and
// again when it listens once more (a release while it was gone would be
// missed otherwise: a spurious wake-up costs an attempt, a missed one a
// poll).
type listener struct {
	url     string
	channel string

	mu      sync.Mutex
	watches map[string]map[*func()]struct{}
	ready   chan struct{} // closed while the session LISTENs; replaced when it is lost
	closed  bool
	cancel  context.CancelFunc
	done    chan struct{}
}

func newListener(url, channel string) *listener {
	return &listener{url: url, channel: channel, watches: map[string]map[*func()]struct{}{}, ready: make(chan struct{}), done: make(chan struct{})}
}

// Watch implements backend.Watcher.
func (ln *listener) watch(key string, wake func()) (<-chan struct{}, func()) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.closed {
		return make(chan struct{}), func() {} // reports nothing: ready stays open
	}
	if ln.cancel == nil {
		ctx, cancel := context.WithCancel(context.Background())
		ln.cancel = cancel
		go ln.loop(ctx) // owned by the listener: close ends it and waits
	}
	w := &wake
	if ln.watches[key] == nil {
		ln.watches[key] = map[*func()]struct{}{}
	}
	ln.watches[key][w] = struct{}{}
	var once sync.Once
	return ln.ready, func() {
		once.Do(func() {
			ln.mu.Lock()
			defer ln.mu.Unlock()
			delete(ln.watches[key], w)
			if len(ln.watches[key]) == 0 {
				delete(ln.watches, key)
			}
		})
	}
}

func (ln *listener) loop(ctx context.Context) {
	defer close(ln.done)
	const first = 50 * time.Millisecond
	backoff := first
	for again := false; ctx.Err() == nil; again = true {
		listened := ln.session(ctx, again)
		if ctx.Err() != nil {
			return
		}
		ln.lost()
		if listened { // a session that worked: the next failure is news
			backoff = first
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// session connects, LISTENs, and wakes watches until the session fails or
// ctx ends; listened says whether it got as far as LISTEN. A session after
// a lost one (again) wakes every watch once it listens: a release between
// the two went unheard.
func (ln *listener) session(ctx context.Context, again bool) (listened bool) {
	conn, err := pgx.Connect(ctx, ln.url)
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ln.channel}.Sanitize()); err != nil {
		return false
	}
	ln.mu.Lock()
	close(ln.ready)
	ln.mu.Unlock()
	if again {
		ln.wakeAll()
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		ln.wake(n.Payload)
	}
}

func (ln *listener) wake(key string) {
	ln.mu.Lock()
	var fns []func()
	for w := range ln.watches[key] {
		fns = append(fns, *w)
	}
	ln.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

// lost marks the session gone: later watches wait for the next one, and
// every watch is woken, since a release meanwhile goes unheard.
func (ln *listener) lost() {
	ln.mu.Lock()
	select {
	case <-ln.ready:
		ln.ready = make(chan struct{})
	default:
	}
	ln.mu.Unlock()
	ln.wakeAll()
}

func (ln *listener) wakeAll() {
	ln.mu.Lock()
	var fns []func()
	for _, ws := range ln.watches {
		for w := range ws {
			fns = append(fns, *w)
		}
	}
	ln.mu.Unlock()
	for _, fn := range fns {
		fn()
	}
}

func (ln *listener) close() {
	ln.mu.Lock()
	ln.closed = true
	cancel := ln.cancel
	ln.mu.Unlock()
	if cancel != nil {
		cancel()
		<-ln.done
	}
}
