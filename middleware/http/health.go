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
// While it is down, requests go straight to the origin and call nothing.
//
// The probe is one PING on a goroutine of its own, started by the first
// request that finds Redis down after the probe time (jittered, so that
// replicas do not probe in step) and never waited for by that request. At
// most one runs at a time, and it ends with its PING, which the Redis
// timeout bounds (a client that does not apply context deadlines to its
// sockets waits its own read timeout on a hung server, then gives up too).
// So probe goroutines exist only while Redis is down and requests come, each
// for one bounded call: there is nothing to close, and a middleware whose
// service stops receiving requests leaves nothing running.
//
// Lock order: mu, then nothing.
type health struct {
	client  redis.UniversalClient
	timeout time.Duration

	down atomic.Bool // read by every request, without mu

	mu      sync.Mutex // guards the fields below; down changes under it too
	next    time.Time  // no probe starts before it
	probing bool
	probes  sync.WaitGroup // the running probe, for tests
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
// none is running. It does not block.
func (s *health) probeIfDue() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.down.Load() || s.probing || time.Now().Before(s.next) {
		return
	}
	s.probing = true
	s.probes.Add(1)
	go s.probe()
}

// probe PINGs Redis once, on a context of its own (nothing of a request's),
// and marks it up when answered; otherwise the next probe is due a jittered
// interval later.
func (s *health) probe() {
	defer s.probes.Done()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	err := s.client.Ping(ctx).Err()
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.probing = false
	s.next = time.Now().Add(probeDelay())
	if err == nil {
		s.down.Store(false)
	}
}

func probeDelay() time.Duration { return probeMin + rand.N(probeMax-probeMin) }
