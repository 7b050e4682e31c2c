package redisrt

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Subscriber is the release subscription behind a Redis driver's
// backend.Watcher: a release script publishes on the key's channel, and the
// subscription wakes the watchers of the key. Where a channel is subscribed
// is the driver's (SubscriberConfig.Targets): one pub/sub connection for all
// channels on a standalone or Sentinel deployment; on Cluster one sharded
// subscription per channel, since a sharded subscription lives on the node
// that owns the channel's slot; one connection per node for Redlock.
//
// No caller writes to a pub/sub connection: each shard has a writer
// goroutine that sends the (un)subscriptions asked for, in order, each
// bounded by subscribeTimeout. A slow or paused server (one Redlock node of
// five) therefore never holds up Watch or its stop; go-redis holds a
// PubSub's mutex while it connects, so a write from the caller could wait
// seconds behind the receive loop's dial.
//
// It is safe for concurrent use. Lock order: mu alone; wake functions are
// called after it is released.
type Subscriber struct {
	cfg    SubscriberConfig
	mu     sync.Mutex
	closed bool
	shards map[string]*shard // by Target.Name
	chans  map[string]*subscription
	wg     sync.WaitGroup // writers and receive loops
}

// SubscriberConfig says where and how a Subscriber subscribes.
type SubscriberConfig struct {
	// Sharded: SSUBSCRIBE (Redis 7 Cluster), a shard per channel, dropped
	// with its last watch; else SUBSCRIBE.
	Sharded bool
	// Channel is key's release channel; nil: the key itself.
	Channel func(key string) string
	// Targets lists where channel is subscribed; none: Watch reports nothing
	// (the Locker polls). Called with the Subscriber's mutex held: it must
	// not call back into the Subscriber, and must return the same targets
	// for a channel every time.
	Targets func(channel string) []Target
	// Accept reports whether a release whose notification carries payload
	// (the Locker the release was reserved for, "" for any) is this
	// driver's to report; nil accepts all. A release reserved for another
	// Locker's waiter is not ours to try: only that Locker's waiter wakes
	// (no herd).
	Accept func(payload string) bool
}

// Target is where a channel is subscribed: a shard's name (subscriptions
// of one name share a connection) and its client.
type Target struct {
	Name   string
	Client redis.UniversalClient
}

type shard struct {
	ps      *redis.PubSub
	n       int             // channels subscribed through this shard
	want    map[string]bool // under Subscriber.mu: channel -> subscribe (true) or unsubscribe, not yet sent
	kick    chan struct{}   // cap 1: want has something
	ctx     context.Context // ends when the shard is dropped
	drop    context.CancelFunc
	started bool // writer only: the receive loop runs
}

type subscription struct {
	wake     func()
	ready    chan struct{} // closed at the first server confirmation
	expect   int           // confirmations of the first subscription: one per target
	confirms int
	gap      bool // the server confirmed an unsubscribe while we want the channel
	removed  bool // its stop ran
}

// subscribeTimeout bounds one (un)subscribe write, connecting included.
const subscribeTimeout = 2 * time.Second

// NewSubscriber returns a Subscriber with no subscription; it connects
// when the first Watch asks for one.
func NewSubscriber(cfg SubscriberConfig) *Subscriber {
	return &Subscriber{cfg: cfg, shards: map[string]*shard{}, chans: map[string]*subscription{}}
}

// Watch subscribes to key's release channel on every target and calls wake
// (on the Subscriber's goroutine, without a lock held) for each release
// reported there, and whenever a connection came back and subscribed again
// (releases meanwhile may be lost), until stop is called. ready is closed
// at the first confirmation from a server; it is never closed when no
// release will be reported (no targets, or the Subscriber is closed), so
// that the caller, as backend.Watcher's contract has it, polls. It never
// blocks on the network.
//
// Two watches of one key can overlap (a stop may run after a newer Watch):
// the newer one gets the wake-ups, and each stop ends its own watch; the
// channel stays subscribed while a newer watch of it is current.
func (s *Subscriber) Watch(key string, wake func()) (ready <-chan struct{}, stop func()) {
	if wake == nil {
		wake = func() {}
	}
	ch := key
	if s.cfg.Channel != nil {
		ch = s.cfg.Channel(key)
	}
	sub := s.add(ch, wake)
	if sub == nil {
		return make(chan struct{}), func() {}
	}
	return sub.ready, func() { s.remove(ch, sub) }
}

// add asks for ch on every target and returns the subscription, nil once the
// Subscriber is closed, or without targets.
func (s *Subscriber) add(ch string, wake func()) *subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.cfg.Targets == nil {
		return nil
	}
	ts := s.cfg.Targets(ch)
	if len(ts) == 0 {
		return nil // a backend without notifications: the poll covers it
	}
	sub := &subscription{wake: wake, ready: make(chan struct{}), expect: len(ts)}
	s.chans[ch] = sub
	for _, t := range ts {
		sh := s.shards[t.Name]
		if sh == nil {
			sh = s.newShard(t)
			s.shards[t.Name] = sh
		}
		sh.n++
		sh.ask(ch, true)
	}
	return sub
}

// newShard starts a shard's writer; called with s.mu held.
func (s *Subscriber) newShard(t Target) *shard {
	sh := &shard{want: map[string]bool{}, kick: make(chan struct{}, 1)}
	sh.ctx, sh.drop = context.WithCancel(context.Background())
	// No channels yet: go-redis connects on the first (S)SUBSCRIBE, which
	// the writer sends.
	if s.cfg.Sharded {
		sh.ps = t.Client.SSubscribe(sh.ctx)
	} else {
		sh.ps = t.Client.Subscribe(sh.ctx)
	}
	s.wg.Add(1)
	go s.writer(sh) // owned by the Subscriber: Close drops the shard and waits (s.wg)
	return sh
}

// ask queues a write for the shard's writer; the latest wish per channel
// wins. Called with Subscriber.mu held.
func (sh *shard) ask(ch string, on bool) {
	sh.want[ch] = on
	select {
	case sh.kick <- struct{}{}:
	default:
	}
}

// remove ends sub's watch of ch; the channel stays subscribed while a
// newer watch of it is current.
func (s *Subscriber) remove(ch string, sub *subscription) {
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
	for _, t := range s.cfg.Targets(ch) {
		sh := s.shards[t.Name]
		if sh == nil {
			continue
		}
		sh.n--
		if s.cfg.Sharded && sh.n == 0 {
			delete(s.shards, t.Name)
			sh.drop() // the writer closes the connection
		} else if current {
			sh.ask(ch, false)
		}
	}
}

// Close drops every subscription and waits for the shards' goroutines;
// later Watch calls report nothing. Close is idempotent.
func (s *Subscriber) Close() {
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
