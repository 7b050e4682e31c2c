package httplock

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hungPings holds each PING until the test releases it, whatever its
// context says (a client that does not apply deadlines to its sockets, on a
// hung server); a released PING is answered. No command reaches a server.
type hungPings struct {
	mu      sync.Mutex
	held    []chan struct{}
	running int
}

func (p *hungPings) DialHook(next redis.DialHook) redis.DialHook { return next }

func (p *hungPings) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		ch := make(chan struct{})
		p.mu.Lock()
		p.held = append(p.held, ch)
		p.running++
		p.mu.Unlock()
		<-ch
		p.mu.Lock()
		p.running--
		p.mu.Unlock()
		return nil
	}
}

func (p *hungPings) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// counts returns how many PINGs were made and how many still run.
func (p *hungPings) counts() (started, running int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held), p.running
}

func (p *hungPings) release(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.held[i])
}

// TestLostProbe: a probe older than twice the store timeout is lost and
// another may start, but never while an earlier lost one still runs, so at
// most two probes run; a lost probe's answer is ignored.
func TestLostProbe(t *testing.T) {
	pings := &hungPings{}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	rdb.AddHook(pings)
	t.Cleanup(func() { _ = rdb.Close() })
	const timeout = 20 * time.Millisecond
	s := newHealth(rdb, timeout)
	s.fail()
	// due asks for a probe once the interval is over, with the current
	// probe (if any) started age ago, and says how many probes have started
	// (gen, which probeIfDue raises before the probe's goroutine starts).
	due := func(age time.Duration) uint64 {
		s.mu.Lock()
		s.next = time.Time{}
		s.started = time.Now().Add(-age)
		s.mu.Unlock()
		s.probeIfDue()
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.gen
	}
	const young, old = 0, 3 * timeout // a probe is lost at 2 × timeout
	waitStarted := func(n int) {
		t.Helper()
		require.Eventually(t, func() bool { started, _ := pings.counts(); return started == n },
			5*time.Second, time.Millisecond, "PING %d never started", n)
	}
	released := 0
	t.Cleanup(func() {
		started, _ := pings.counts()
		for i := released; i < started; i++ {
			pings.release(i)
		}
		s.probes.Wait()
	})

	due(young)
	waitStarted(1)
	assert.Equal(t, uint64(1), due(young), "a probe started beside one not yet lost")

	// The first is lost: a second starts.
	assert.Equal(t, uint64(2), due(old))
	waitStarted(2)
	// The second is lost too, but the first still runs: no third.
	assert.Equal(t, uint64(2), due(old), "a third probe beside a lost one")
	started, running := pings.counts()
	assert.Equal(t, 2, started)
	assert.Equal(t, 2, running)

	// The first, lost, is answered: ignored, Redis stays down; a third may
	// start now beside the second.
	pings.release(0)
	released = 1
	require.Eventually(t, func() bool { _, running := pings.counts(); return running == 1 }, 5*time.Second, time.Millisecond)
	require.Eventually(t, func() bool { s.mu.Lock(); defer s.mu.Unlock(); return !s.lost }, 5*time.Second, time.Millisecond)
	assert.False(t, s.up(), "a lost probe's answer marked Redis up")
	assert.Equal(t, uint64(3), due(old))
	waitStarted(3)
	_, running = pings.counts()
	assert.Equal(t, 2, running, "the current probe and one lost")

	// The second (lost) is answered, then the third (current): Redis is up.
	pings.release(1)
	pings.release(2)
	released = 3
	s.probes.Wait()
	assert.True(t, s.up(), "the current probe's answer was not heeded")
}

func TestSetAllowance(t *testing.T) {
	for n, want := range map[int]time.Duration{
		0:          0,
		1:          time.Millisecond,
		64 << 10:   time.Millisecond,
		64<<10 + 1: 2 * time.Millisecond,
		1 << 20:    16 * time.Millisecond,
		256 << 20:  4096 * time.Millisecond,
	} {
		assert.Equal(t, want, setAllowance(n), "%d bytes", n)
	}
}
