package redisrt

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// writer sends the shard's (un)subscriptions until the shard is dropped,
// then closes its connection. It starts the receive loop after the first
// subscription: a sharded PubSub picks its node by its channels.
func (s *Subscriber) writer(sh *shard) {
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
			_ = sh.ps.Unsubscribe(ctx, off...) // sharded shards are dropped instead
		}
		if len(on) > 0 {
			// go-redis keeps the channels even when the write fails, and
			// subscribes them again when the receive loop reconnects.
			if s.cfg.Sharded {
				_ = sh.ps.SSubscribe(ctx, on...)
			} else {
				_ = sh.ps.Subscribe(ctx, on...)
			}
			if !sh.started {
				sh.started = true
				s.wg.Add(1)
				go s.loop(sh) // owned by the Subscriber, like the writer
			}
		}
		cancel()
	}
}

// loop receives confirmations and release messages for one shard until the
// shard is dropped. go-redis reconnects and subscribes again after a
// connection error; releases sent meanwhile are lost, so every confirmation
// of an already-confirmed channel wakes its watcher to try again.
func (s *Subscriber) loop(sh *shard) {
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
			if s.cfg.Accept != nil && !s.cfg.Accept(m.Payload) {
				continue
			}
			if wake := s.wakeOf(m.Channel); wake != nil {
				wake()
			}
		}
	}
}

func (s *Subscriber) confirmed(ch string) {
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
		sub.wake()
	}
}

// unsubscribed notes an unsubscribe the server confirmed for a channel that
// is wanted again (removed and added while the writes were in flight): until
// the new subscription is confirmed, releases are not heard.
func (s *Subscriber) unsubscribed(ch string) {
	s.mu.Lock()
	if sub := s.chans[ch]; sub != nil {
		sub.gap = true
	}
	s.mu.Unlock()
}

// wakeOf is the wake function of ch's current watch, nil without one.
func (s *Subscriber) wakeOf(ch string) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.chans[ch]; sub != nil {
		return sub.wake
	}
	return nil
}
