package httplock

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// health is what one middleware knows of its Redis: up, or down from the
// moment a Redis call made for a request fails until a probe is answered.
// While it is down, requests collapse in-process only and call nothing.
//
// The probe is one PING on a goroutine of its own, started by a request that
// finds Redis down after the probe time (jittered, so that replicas do not
// probe in step) and never waited for by that request. One probe is current
// at a time. Its PING is bounded by WithStoreTimeout, but a client that does
// not apply context deadlines to its sockets waits its own read timeout on a
// hung server, or longer: so a probe still running twice WithStoreTimeout
// after it started is counted as lost, and a new one may start. A lost
// probe's answer, when it comes, is ignored. At most one lost probe is let
// run beside the current one: while one is, a stuck current probe is waited
// for, so a middleware never runs more than two probe goroutines.
//
// So probe goroutines exist only while Redis is down and requests come, each
// for one call that the client ends: there is nothing to close (closing the
// driver's Redis client ends them at once), and a middleware whose service stops
// receiving requests leaves nothing running once they return.
//
// Lock order: mu, then nothing.
type health struct {
	client  redis.UniversalClient
	timeout time.Duration

	down atomic.Bool // read by every request, without mu

	mu      sync.Mutex     // guards the fields below; down changes under it too
	next    time.Time      // no probe starts before it
	probing bool           // the current probe runs
	started time.Time      // when the current probe started
	gen     uint64         // the current probe's number; a probe with another is lost
	lost    bool           // a lost probe still runs
	probes  sync.WaitGroup // every running probe, for tests
	calls   sync.WaitGroup // commands requests stopped waiting for (bounded), for tests
}

// probeMin and probeMax bound the time between probes while Redis is down:
// how late Redis coming back is noticed, at worst about probeMax after it
// answers again (plus the PING).
const (
	probeMin = 500 * time.Millisecond
	probeMax = time.Second
)

func newHealth(client redis.UniversalClient, timeout time.Duration) *health {
	return &health{client: client, timeout: timeout}
}

// up reports whether requests may call Redis.
func (s *health) up() bool { return !s.down.Load() }

// fail marks Redis down, after a call made for a request failed; the first
// probe may start a jittered interval later.
func (s *health) fail() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down.Load() {
		s.next = time.Now().Add(probeDelay())
		s.down.Store(true)
	}
}

// probeIfDue starts a probe when Redis is down, the probe time has come and
// no current probe runs, or the current one is lost (older than twice
// WithStoreTimeout) and no other lost one still runs. It does not block.
func (s *health) probeIfDue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if !s.down.Load() || now.Before(s.next) {
		return
	}
	if s.probing {
		if s.lost || now.Sub(s.started) < 2*s.timeout {
			return
		}
		s.lost = true // the current probe is given up on
	}
	s.probing = true
	s.started = now
	s.gen++
	s.probes.Add(1)
	go s.probe(s.gen)
}

// probe PINGs Redis once, on a context of its own (nothing of a request's).
// If it is still the current probe (gen) when answered, it marks Redis up,
// or else the next probe is due a jittered interval later; if it was lost
// meanwhile, it only makes room for another lost one.
func (s *health) probe(gen uint64) {
	defer s.probes.Done()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	err := s.client.Ping(ctx).Err()
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if gen != s.gen {
		s.lost = false
		return
	}
	s.probing = false
	s.next = time.Now().Add(probeDelay())
	if err == nil {
		s.down.Store(false)
	}
}

func probeDelay() time.Duration { return probeMin + rand.N(probeMax-probeMin) }
