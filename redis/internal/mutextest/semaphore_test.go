package mutextest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// witness counts the permits whose context is live, as their holders see
// them: a holder enters when granted and leaves (once) before it releases
// or when its permit's context ends, whichever comes first.
type witness struct {
	n      int
	mu     sync.Mutex
	live   int
	most   int
	over   int
	tokens map[int64]bool
	dups   int
}

func newWitness(n int) *witness { return &witness{n: n, tokens: map[int64]bool{}} }

// enter records p and returns the holder's leave, which the permit's
// context's end also calls.
func (w *witness) enter(p *mutex.Permit) (leave func()) {
	w.mu.Lock()
	w.live++
	w.most = max(w.most, w.live)
	if w.live > w.n {
		w.over++
	}
	if w.tokens[p.Token()] {
		w.dups++
	}
	w.tokens[p.Token()] = true
	w.mu.Unlock()
	var once sync.Once
	leave = func() {
		once.Do(func() {
			w.mu.Lock()
			w.live--
			w.mu.Unlock()
		})
	}
	context.AfterFunc(p.Context(), leave)
	return leave
}

func (w *witness) check(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	assert.Zero(t, w.over, "more than %d live permits at once (most %d)", w.n, w.most)
	assert.Zero(t, w.dups, "a token was granted twice")
}

func semaphore(t *testing.T, l *mutex.Locker, name string, n int, opts ...mutex.LockOption) *mutex.Semaphore {
	t.Helper()
	s, err := mutex.NewSemaphore(l, name, n, opts...)
	require.NoError(t, err)
	return s
}

// Holders of two Lockers take and give back permits of a semaphore of 3,
// some of them stalling past their lease without renewal (a process that
// stopped): never more than 3 live permits, no token twice. The drift
// margin covers how late this host's timers end a stalled permit.
func TestSemaphoreNeverMoreThanN(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		const n, ttl = 3, 150 * time.Millisecond
		w := newWitness(n)
		var wg sync.WaitGroup
		var stalled atomic.Int32
		for range 2 {
			l := newLocker(t, c, mutex.WithClockDrift(0.3, 0))
			s := semaphore(t, l, "tenant", n, mutex.WithRetry(5*time.Millisecond, 50*time.Millisecond))
			stall := semaphore(t, l, "tenant", n, mutex.WithTTL(ttl), mutex.WithAutoRenew(false))
			for g := range 6 {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					for i := range 12 {
						sem := s
						if g == 0 && i%4 == 1 {
							sem = stall
						}
						p, err := sem.Acquire(ctx)
						if !assert.NoError(t, err) {
							return
						}
						leave := w.enter(p)
						if sem == stall { // never released: its lease runs out
							<-p.Context().Done()
							assert.ErrorIs(t, context.Cause(p.Context()), mutex.ErrLockLost)
							stalled.Add(1)
							continue
						}
						time.Sleep(time.Millisecond) // work under the permit
						leave()
						assert.NoError(t, p.Release(ctx))
					}
				})
			}
		}
		wg.Wait()
		w.check(t)
		assert.Equal(t, int32(6), stalled.Load())
		assert.Equal(t, n, w.most, "the permits were never all in use")
	})
}

// A server paused past the leases: every holder's context ends before its
// lease could end on the server, and after the pause another Locker is
// granted the permits with greater tokens, never more than N at once.
func TestSemaphorePausedServer(t *testing.T) {
	c, srv := redistest.Redis(t)
	const n, ttl = 2, 300 * time.Millisecond
	a, b := newLocker(t, c), newLocker(t, c)
	w := newWitness(n)
	sa := semaphore(t, a, "paused", n, mutex.WithTTL(ttl))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a test that breaks fails, never hangs
	defer cancel()
	var held []*mutex.Permit
	for range n {
		p, err := sa.Acquire(ctx)
		require.NoError(t, err)
		w.enter(p)
		held = append(held, p)
	}
	late := testutil.MeasureLateness(t)
	lastSend := time.Now() // every renewal that succeeded was sent before
	srv.Pause()
	for _, p := range held {
		<-p.Context().Done()
		assert.ErrorIs(t, context.Cause(p.Context()), mutex.ErrLockLost)
		assert.Less(t, time.Since(lastSend), late.Bound(ttl), "lost after the lease could have ended")
	}
	srv.Resume()
	sb := semaphore(t, b, "paused", n)
	for range n {
		p, err := sb.Acquire(ctx)
		require.NoError(t, err)
		w.enter(p)
		assert.Greater(t, p.Token(), held[len(held)-1].Token())
	}
	w.check(t)
	for _, p := range held {
		assert.ErrorIs(t, p.Release(ctx), mutex.ErrNotHeld)
	}
}

// A double release gives back one permit, never two: the second is
// refused locally, and the backend, asked directly, changes nothing; nor
// does a late release of a permit whose lease ran out and was granted
// again.
func TestSemaphoreDoubleReleaseAddsNoPermit(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		l := newLocker(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a test that breaks fails, never hangs
		defer cancel()
		s := semaphore(t, l, "double", 2)
		p1, err := s.Acquire(ctx)
		require.NoError(t, err)
		p2, err := s.Acquire(ctx)
		require.NoError(t, err)
		require.NoError(t, p1.Release(ctx))
		assert.ErrorIs(t, p1.Release(ctx), mutex.ErrNotHeld)

		sem := l.Backend().(backend.Semaphorer)
		gone := backend.Lease{Key: "redfence:double", Owner: "x", Token: p1.Token()}
		for _, p := range []backend.Lease{gone, {Key: "redfence:double", Owner: "x"}} {
			ok, err := sem.ReleasePermit(ctx, p)
			require.NoError(t, err)
			assert.False(t, ok)
		}
		p3, err := s.TryAcquire(ctx)
		require.NoError(t, err)
		_, err = s.TryAcquire(ctx)
		assert.ErrorIs(t, err, mutex.ErrNotAcquired, "a third permit of two")
		_, holders, err := s.Holders(ctx)
		require.NoError(t, err)
		assert.Len(t, holders, 2)
		require.NoError(t, p2.Release(ctx))
		require.NoError(t, p3.Release(ctx))
	})
}

// The backend's own release is idempotent by permit: released once, then
// false, and the holders are what they were.
func TestSemaphorerReleaseIdempotent(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	sem := l.Backend().(backend.Semaphorer)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a test that breaks fails, never hangs
	defer cancel()
	a := backend.PermitAttempt{Key: "redfence:idem", Owner: "o1", TTL: time.Minute, Limit: 1}
	g, err := sem.AcquirePermit(ctx, a)
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, g.Status)
	p := backend.Lease{Key: a.Key, Owner: a.Owner, Token: g.Token, TTL: time.Minute}
	for i, want := range []bool{true, false, false} {
		ok, err := sem.ReleasePermit(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, want, ok, "release %d", i+1)
	}
	g, err = sem.AcquirePermit(ctx, backend.PermitAttempt{Key: a.Key, Owner: "o2", TTL: time.Minute, Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, backend.Acquired, g.Status)
	g, err = sem.AcquirePermit(ctx, backend.PermitAttempt{Key: a.Key, Owner: "o3", TTL: time.Minute, Limit: 1})
	require.NoError(t, err)
	assert.Equal(t, backend.Held, g.Status, "one release gave back one permit")
	assert.Greater(t, g.Remaining, 50*time.Second)
}

// Lowering the limit takes no permit back; it stops grants until the
// holders are fewer. Raising it wakes a waiter.
func TestSemaphoreSetLimit(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a test that breaks fails, never hangs
	defer cancel()
	s := semaphore(t, a, "limit", 3)
	var held []*mutex.Permit
	for range 3 {
		p, err := s.Acquire(ctx)
		require.NoError(t, err)
		held = append(held, p)
	}
	require.NoError(t, s.SetLimit(ctx, 1))
	other := semaphore(t, b, "limit", 10) // the stored limit wins over 10
	for i, p := range held {
		assert.NoError(t, p.Context().Err(), "permit %d taken back", i)
		_, err := other.TryAcquire(ctx)
		assert.ErrorIs(t, err, mutex.ErrNotAcquired, "granted with %d held of 1", 3-i)
		require.NoError(t, p.Release(ctx))
	}
	p, err := other.TryAcquire(ctx)
	require.NoError(t, err)

	before := evalCalls(c.Info(ctx, "commandstats").Val())
	got := make(chan error, 1)
	slow := semaphore(t, b, "limit", 1, mutex.WithRetry(time.Minute, time.Minute)) // no poll: only a wake-up ends the wait
	go func() {
		q, err := slow.Acquire(ctx)
		if err == nil {
			err = q.Release(ctx)
		}
		got <- err
	}()
	// The waiter found the permit held and listens for releases: its
	// subscription is there and it made its attempts (one, and one once
	// subscribed).
	require.Eventually(t, func() bool {
		subs := c.PubSubNumSub(ctx, "redfence:{limit}:sem:released").Val()["redfence:{limit}:sem:released"]
		return subs == 1 && evalCalls(c.Info(ctx, "commandstats").Val()) >= before+2
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, s.SetLimit(ctx, 2))
	select {
	case err := <-got:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second): // its poll would come after p's lease of 10s
		t.Fatal("a raised limit did not wake the waiter")
	}
	require.NoError(t, p.Release(ctx))
	limit, holders, err := s.Holders(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, limit)
	assert.Empty(t, holders)
}
