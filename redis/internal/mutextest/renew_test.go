package mutextest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// pipelines counts pipelined round trips (renewal batches).
type pipelines struct{ n atomic.Int64 }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { p.n.Add(1); return next(ctx, cmds) }
}

// TestFailedRenewalsBackOff: with the server gone, renewals fail at once;
// the loop retries every TTL/10 until the lease ends, not in a tight loop
// (it once spun, thousands of attempts, never reaching its stop signal), and
// Close returns promptly.
func TestFailedRenewalsBackOff(t *testing.T) {
	_, srv := redistest.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	var p pipelines
	c.AddHook(&p)
	l := mustLocker(t, c)
	ctx := context.Background()
	lk, err := l.Lock(ctx, "gone", mutex.WithTTL(900*time.Millisecond))
	require.NoError(t, err)
	srv.Kill()
	<-lk.Context().Done() // renewals fail from 300 ms until the lease ends
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	assert.Less(t, p.n.Load(), int64(30), "renewal attempts while the server was gone")
	t.Logf("%d renewal round trips", p.n.Load())
	late := testutil.MeasureLateness(t)
	start := time.Now()
	require.NoError(t, l.Close())
	assert.Less(t, time.Since(start), late.Bound(time.Second))
}

// TestShortCyclesDoNotWakeTheRenewer: a stream of Lock/Release cycles with one
// TTL wakes the renewal loop about once, not once per renewal period: when
// the loop finds nothing to renew it stays due as the last lock would have
// been, so a lock taken after it, with the same TTL, falls due later and
// need not wake it. (It used to sleep for an hour then, and the next Lock
// woke it: a context switch on the Lock path.) A lock with a shorter TTL
// still wakes the loop, and is renewed.
func TestShortCyclesDoNotWakeTheRenewer(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	// 30 ms leases fall due every 10 ms: 300 ms of cycles span 30 periods,
	// at whose ends the loop mostly finds no lock held. A pause of more than
	// a period between two Locks (a busy host's) lets the loop go idle, and
	// the next Lock rightly wakes it: those are allowed for.
	const ttl, period = 30 * time.Millisecond, 10 * time.Millisecond
	pauses := int64(0)
	var prev time.Time
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		now := time.Now()
		if !prev.IsZero() && now.Sub(prev) > period {
			pauses++
		}
		prev = now
		lk, err := l.Lock(ctx, "cycle", mutex.WithTTL(ttl))
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	}
	assert.LessOrEqual(t, mutexhooks.RenewWakes(l), 3+pauses, "renewal loop woken by short cycles (%d pauses)", pauses)

	lk, err := l.Lock(ctx, "long", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	// Wait for the loop to sleep until the long lock is due.
	require.Eventually(t, func() bool {
		return mutexhooks.RenewAsleep(l).After(time.Now().Add(10 * time.Second))
	}, 2*time.Second, time.Millisecond, "the loop never planned for the long lock")
	before := mutexhooks.RenewWakes(l)
	// Due in a third of a second, long before the loop would wake; its
	// renewals may come 660 ms late, which a busy host does not reach.
	short, err := l.Lock(ctx, "short", mutex.WithTTL(time.Second))
	require.NoError(t, err)
	assert.Equal(t, before+1, mutexhooks.RenewWakes(l), "a lock due before the loop wakes must wake it")
	select {
	case <-short.Context().Done():
		t.Fatalf("short lock lost: %v", context.Cause(short.Context()))
	case <-time.After(2 * time.Second): // two leases
	}
	require.NoError(t, short.Release(ctx))
	require.NoError(t, lk.Release(ctx))
}
