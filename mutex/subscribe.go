package mutex

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// subscriber owns the Locker's release subscription: one pub/sub connection
// for all channels on a standalone or Sentinel deployment; on Cluster one
// sharded subscription per channel, since a sharded subscription lives on the
// node that owns the channel's slot; one connection per node for Redlock. A
// channel is subscribed while the Locker has waiters for its key.
//
// No caller writes to a pub/sub connection: each shard has a writer
// goroutine that sends the (un)subscriptions asked for, in order, each
// bounded by subscribeTimeout. A slow or paused server (one Redlock node of
// five) therefore never holds up Lock or its clean-up; go-redis holds a
// PubSub's mutex while it connects, so a write from the caller could wait
// seconds behind the receive loop's dial.
//
// Lock order: subscriber.mu alone; wake-ups (Locker.mu) come after it is
// released.
type subscriber struct {
	l      *Locker
	mu     sync.Mutex
	closed bool
	shards map[string]*shard // by shard name: "" standalone, the channel on Cluster, "node<i>" Redlock
	chans  map[string]*subscription
	wg     sync.WaitGroup
}

type shard struct {
	ps      *redis.PubSub
	n       int             // channels subscribed through this shard
	want    map[string]bool // under subscriber.mu: channel -> subscribe (true) or unsubscribe, not yet sent
	kick    chan struct{}   // cap 1: want has something
	ctx     context.Context // ends when the shard is dropped
	drop    context.CancelFunc
	started bool // writer only: the receive loop runs
}

type subscription struct {
	key      string
	ready    chan struct{} // closed at the first server confirmation
	expect   int           // confirmations of the first subscription: one per target
	confirms int
	gap      bool // the server confirmed an unsubscribe while we want the channel
	removed  bool // its stop ran
}

// subscribeTimeout bounds one (un)subscribe write, connecting included.
const subscribeTimeout = 2 * time.Second

func newSubscriber(l *Locker) *subscriber {
	return &subscriber{l: l, shards: map[string]*shard{}, chans: map[string]*subscription{}}
}

// subscribe asks the backend for key's release notifications, once per
// queue, and waits (briefly, bounded by ctx) for the server to confirm, so
// that a release after this returns is not missed. Without a confirmation in
// time the caller goes on: the fallback poll covers it.
func (l *Locker) subscribe(ctx context.Context, key, lockKey string) {
	l.mu.Lock()
	q := l.queues[key]
	if q == nil || q.subscribed {
		l.mu.Unlock()
		return
	}
	q.subscribed = true
	l.mu.Unlock()

	ready, stop := l.be.watch(key, lockKey) // not under l.mu: see the lock order
	l.mu.Lock()
	if l.queues[key] == q {
		q.unwatch, stop = stop, nil
	}
	l.mu.Unlock()
	if stop != nil { // every waiter left meanwhile
		stop()
		return
	}
	if ready == nil {
		return
	}
	t := time.NewTimer(200 * time.Millisecond)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
	case <-l.done:
	}
}

// watch subscribes to lockKey's release channel on the backend's targets:
// ready is closed at the first confirmation, nil when there is none to
// wait for.
//
// Two watches of one channel can overlap: a queue's stop runs after it left
// the Locker's map, and a new queue for the key may have watched meanwhile.
// Each stop ends its own watch alone.
func (s *subscriber) watch(key, lockKey string) (ready <-chan struct{}, stop func()) {
	ch := redisproto.ChannelOf(lockKey)
	sub := s.add(ch, key)
	if sub == nil {
		return nil, func() {}
	}
	return sub.ready, func() { s.remove(ch, sub) }
}

// target is where a channel is subscribed: the shard's name and client.
type target struct {
	name string
	c    redis.UniversalClient
}

// targets lists where ch is subscribed: the one connection of a standalone
// deployment, the channel's own sharded subscription on Cluster, every node
// for Redlock (a release publishes on each node that held the lock).
func (s *subscriber) targets(ch string) []target { return s.l.be.targets(ch) }

// add asks for ch on every target and returns the subscription, whose
// ready is closed at the first confirmation (nil once the subscriber is
// closed, or without targets). It never blocks on the network.
func (s *subscriber) add(ch, key string) *subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	ts := s.targets(ch)
	if len(ts) == 0 {
		return nil // a backend without notifications: the poll covers it
	}
	sub := &subscription{key: key, ready: make(chan struct{}), expect: len(ts)}
	s.chans[ch] = sub
	for _, t := range ts {
		sh := s.shards[t.name]
		if sh == nil {
			sh = &shard{want: map[string]bool{}, kick: make(chan struct{}, 1)}
			sh.ctx, sh.drop = context.WithCancel(context.Background())
			// No channels yet: go-redis connects on the first (S)SUBSCRIBE,
			// which the writer sends.
			if s.l.cluster {
				sh.ps = t.c.SSubscribe(sh.ctx)
			} else {
				sh.ps = t.c.Subscribe(sh.ctx)
			}
			s.shards[t.name] = sh
			s.wg.Add(1)
			go s.writer(sh) // owned by the subscriber: close drops the shard and waits (s.wg)
		}
		sh.n++
		sh.ask(ch, true)
	}
	return sub
}

// ask queues a write for the shard's writer; the latest wish per channel
// wins. Called with s.mu held.
func (sh *shard) ask(ch string, on bool) {
	sh.want[ch] = on
	select {
	case sh.kick <- struct{}{}:
	default:
	}
}

// remove ends sub's watch of ch; the channel stays subscribed while a
// newer watch of it is current.
func (s *subscriber) remove(ch string, sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || sub.removed {
		return
	}
	sub.removed = true
	current := s.chans[ch] == sub
	if current {
		delete(s.chans, ch)
	}
	for _, t := range s.targets(ch) {
		sh := s.shards[t.name]
		if sh == nil {
			continue
		}
		sh.n--
		if s.l.cluster && sh.n == 0 {
			delete(s.shards, t.name)
			sh.drop() // the writer closes the connection
		} else if current {
			sh.ask(ch, false)
		}
	}
}

// close drops every subscription and waits for the shards' goroutines.
func (s *subscriber) close() {
	s.mu.Lock()
	s.closed = true
	shards := s.shards
	s.shards, s.chans = map[string]*shard{}, map[string]*subscription{}
	s.mu.Unlock()
	for _, sh := range shards {
		sh.drop()
	}
	s.wg.Wait()
}

// writer sends the shard's (un)subscriptions until the shard is dropped,
// then closes its connection. It starts the receive loop after the first
// subscription: a sharded PubSub picks its node by its channels.
func (s *subscriber) writer(sh *shard) {
	defer s.wg.Done()
	defer sh.ps.Close()
	var on, off []string
	for {
		select {
		case <-sh.ctx.Done():
			return
		case <-sh.kick:
		}
		on, off = on[:0], off[:0]
		s.mu.Lock()
		for ch, v := range sh.want {
			if v {
				on = append(on, ch)
			} else {
				off = append(off, ch)
			}
		}
		clear(sh.want)
		s.mu.Unlock()

		ctx, cancel := context.WithTimeout(sh.ctx, subscribeTimeout)
		if len(off) > 0 {
			_ = sh.ps.Unsubscribe(ctx, off...) // Cluster shards are dropped instead
		}
		if len(on) > 0 {
			// go-redis keeps the channels even when the write fails, and
			// subscribes them again when the receive loop reconnects.
			if s.l.cluster {
				_ = sh.ps.SSubscribe(ctx, on...)
			} else {
				_ = sh.ps.Subscribe(ctx, on...)
			}
			if !sh.started {
				sh.started = true
				s.wg.Add(1)
				go s.loop(sh) // owned by the subscriber, like the writer
			}
		}
		cancel()
	}
}

// loop receives confirmations and release messages for one shard until the
// shard is dropped. go-redis reconnects and subscribes again after a
// connection error; releases sent meanwhile are lost, so every confirmation
// of an already-confirmed channel wakes its head to try again.
func (s *subscriber) loop(sh *shard) {
	defer s.wg.Done()
	for {
		msg, err := sh.ps.Receive(sh.ctx)
		if err != nil {
			t := time.NewTimer(50 * time.Millisecond)
			select {
			case <-sh.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			continue
		}
		switch m := msg.(type) {
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				s.confirmed(m.Channel)
			case "unsubscribe", "sunsubscribe":
				s.unsubscribed(m.Channel)
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
		// subscribed again, or an old unsubscribe ran between; releases
		// meanwhile may be lost.
		again = sub.confirms > sub.expect || sub.gap
		sub.gap = false
	}
	s.mu.Unlock()
	if again {
		s.l.wakeLocal(sub.key)
	}
}

// unsubscribed notes an unsubscribe the server confirmed for a channel that
// is wanted again (removed and added while the writes were in flight): until
// the new subscription is confirmed, releases are not heard.
func (s *subscriber) unsubscribed(ch string) {
	s.mu.Lock()
	if sub := s.chans[ch]; sub != nil {
		sub.gap = true
	}
	s.mu.Unlock()
}

func (s *subscriber) keyOf(ch string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.chans[ch]; sub != nil {
		return sub.key, true
	}
	return "", false
}
