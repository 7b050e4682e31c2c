package mutex

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subscriber owns the Locker's release subscription: one pub/sub connection
// for all channels on a standalone or Sentinel deployment; on Cluster one
// sharded subscription per channel, since a sharded subscription lives on the
// node that owns the channel's slot. A channel is subscribed while the
// Locker has waiters for its key.
type subscriber struct {
	l      *Locker
	mu     sync.Mutex
	closed bool
	shards map[string]*shard // by shard name: "" standalone, the channel on Cluster
	chans  map[string]*subscription
	wg     sync.WaitGroup
}

type shard struct {
	ps      *redis.PubSub
	n       int
	started bool
	done    chan struct{} // closed when the shard is dropped
}

type subscription struct {
	key      string
	ready    chan struct{} // closed at the first server confirmation
	expect   int           // confirmations of the first subscription: one per target
	confirms int
}

func newSubscriber(l *Locker) *subscriber {
	return &subscriber{l: l, shards: map[string]*shard{}, chans: map[string]*subscription{}}
}

// subscribe makes the queue of key subscribed to its release channel and
// waits (briefly, bounded by ctx) for the server to confirm, so that a
// release after this returns is not missed. Without a confirmation in time
// the caller goes on: the fallback poll covers it.
func (l *Locker) subscribe(ctx context.Context, key, lockKey string, w *waiter) {
	ch := channelOf(lockKey)
	l.mu.Lock()
	q := l.queues[key]
	if q == nil || q.subscribed {
		l.mu.Unlock()
		return
	}
	q.subscribed, q.channel = true, ch
	l.mu.Unlock()

	ready := l.subs.add(ctx, ch, key)
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
	case <-l.done:
	}
}

// target is where a channel is subscribed: the shard's name and client.
type target struct {
	name string
	c    redis.UniversalClient
}

// targets lists where ch is subscribed: the one connection of a standalone
// deployment, the channel's own sharded subscription on Cluster, every node
// for Redlock (a release publishes on each node that held the lock).
func (s *subscriber) targets(ch string) []target {
	switch {
	case s.l.cluster:
		return []target{{name: ch, c: s.l.client}}
	case s.l.nodes != nil:
		out := make([]target, len(s.l.nodes))
		for i, c := range s.l.nodes {
			out[i] = target{name: "node" + strconv.Itoa(i), c: c}
		}
		return out
	}
	return []target{{name: "", c: s.l.client}}
}

func (s *subscriber) add(ctx context.Context, ch, key string) <-chan struct{} {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	ts := s.targets(ch)
	sub := &subscription{key: key, ready: make(chan struct{}), expect: len(ts)}
	s.chans[ch] = sub
	shards := make([]*shard, len(ts))
	starts := make([]bool, len(ts))
	for i, t := range ts {
		sh := s.shards[t.name]
		if sh == nil {
			sh = &shard{done: make(chan struct{})}
			// No channels yet: go-redis connects on the first (S)SUBSCRIBE.
			if s.l.cluster {
				sh.ps = t.c.SSubscribe(ctx)
			} else {
				sh.ps = t.c.Subscribe(ctx)
			}
			s.shards[t.name] = sh
		}
		sh.n++
		starts[i] = !sh.started
		sh.started = true
		shards[i] = sh
	}
	s.mu.Unlock()

	// Only the command is written here; the confirmation arrives in loop.
	for i, sh := range shards {
		if s.l.cluster {
			_ = sh.ps.SSubscribe(ctx, ch)
		} else {
			_ = sh.ps.Subscribe(ctx, ch)
		}
		if starts[i] {
			s.wg.Add(1)
			go s.loop(sh)
		}
	}
	return sub.ready
}

func (s *subscriber) remove(ch string) {
	s.mu.Lock()
	if s.closed || s.chans[ch] == nil {
		s.mu.Unlock()
		return
	}
	delete(s.chans, ch)
	var keep, drop []*shard
	for _, t := range s.targets(ch) {
		sh := s.shards[t.name]
		sh.n--
		if s.l.cluster && sh.n == 0 {
			delete(s.shards, t.name)
			close(sh.done)
			drop = append(drop, sh)
		} else {
			keep = append(keep, sh)
		}
	}
	s.mu.Unlock()

	for _, sh := range drop {
		_ = sh.ps.Close()
	}
	if len(keep) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for _, sh := range keep {
		_ = sh.ps.Unsubscribe(ctx, ch)
	}
}

// close drops every subscription and waits for the receive loops.
func (s *subscriber) close() {
	s.mu.Lock()
	s.closed = true
	shards := s.shards
	s.shards, s.chans = map[string]*shard{}, map[string]*subscription{}
	s.mu.Unlock()
	for _, sh := range shards {
		close(sh.done)
		_ = sh.ps.Close()
	}
	s.wg.Wait()
}

// loop receives confirmations and release messages for one shard until the
// shard is dropped. go-redis reconnects and subscribes again after a
// connection error; releases sent meanwhile are lost, so every confirmation
// of an already-confirmed channel wakes its head to try again.
func (s *subscriber) loop(sh *shard) {
	defer s.wg.Done()
	for {
		msg, err := sh.ps.Receive(context.Background())
		if err != nil {
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-sh.done:
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" || m.Kind == "ssubscribe" {
				s.confirmed(m.Channel)
			}
		case *redis.Message:
			// A release reserved for another Locker's waiter is not ours to
			// try: only that Locker's head wakes (no herd).
			if m.Payload != "" && m.Payload != s.l.id {
				continue
			}
			if key, ok := s.keyOf(m.Channel); ok {
				s.l.wakeLocal(key)
			}
		}
	}
}

func (s *subscriber) confirmed(ch string) {
	s.mu.Lock()
	sub := s.chans[ch]
	again := false
	if sub != nil {
		sub.confirms++
		if sub.confirms == 1 {
			close(sub.ready)
		}
		// More confirmations than targets: a connection came back and
		// subscribed again; releases meanwhile may be lost.
		again = sub.confirms > sub.expect
	}
	s.mu.Unlock()
	if again {
		s.l.wakeLocal(sub.key)
	}
}

func (s *subscriber) keyOf(ch string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.chans[ch]; sub != nil {
		return sub.key, true
	}
	return "", false
}
