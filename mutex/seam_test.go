package mutex

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memory is a deliberately simple backend, in memory: the Locker's local
// machinery (queue, reentrancy, lease deadline, renewal, loss signal) runs
// over the seam alone, with no Redis and no notifications (the poll covers
// them), and keeps the contract of docs/architecture.md.
type memory struct {
	mu      sync.Mutex
	locks   map[string]*memLock
	last    int64 // the last token issued
	extends atomic.Int64
}

type memLock struct {
	owner string
	token int64
	count int
	until time.Time
}

type memBackend struct {
	m *memory
	l *Locker
}

// memLocker is a Locker over m and nothing else.
func memLocker(t *testing.T, m *memory, opts ...Option) *Locker {
	l := New(nil, opts...)
	l.err, l.be = l.cfg.err, memBackend{m, l}
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// held returns the live lock on lockKey, under m.mu.
func (m *memory) held(lockKey string) *memLock {
	k := m.locks[lockKey]
	if k == nil || !time.Now().Before(k.until) {
		return nil
	}
	return k
}

func (b memBackend) acquire(_ context.Context, _, lockKey, owner string, lc *lockConfig, _ bool, _ time.Time) (acquireResult, error) {
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.held(lockKey); k != nil {
		if k.owner != owner {
			return acquireResult{status: 0, remaining: time.Until(k.until)}, nil
		}
		k.count++
		k.until = time.Now().Add(lc.ttl)
		return acquireResult{status: 2, token: k.token}, nil
	}
	m.last++
	m.locks[lockKey] = &memLock{owner: owner, token: m.last, count: 1, until: time.Now().Add(lc.ttl)}
	return acquireResult{status: 1, token: m.last}, nil
}

func (b memBackend) abandon(lockKey, owner string) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if k := b.m.held(lockKey); k != nil && k.owner == owner {
		delete(b.m.locks, lockKey)
	}
}

func (b memBackend) release(_ context.Context, lk *Lock) (int64, <-chan error, error) {
	m := b.m
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.held(lk.lockKey)
	if k == nil || k.owner != lk.owner || k.token != lk.token {
		return -1, nil, nil
	}
	if k.count--; k.count == 0 {
		delete(m.locks, lk.lockKey)
	}
	return int64(k.count), nil, nil
}

func (b memBackend) releaseAgain(ctx context.Context, lk *Lock) error {
	_, _, err := b.release(ctx, lk)
	return err
}

func (b memBackend) extend(_ context.Context, locks []*Lock, ttls []time.Duration) ([]renewOutcome, time.Time, error) {
	m := b.m
	m.extends.Add(1)
	sent := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]renewOutcome, len(locks))
	for i, lk := range locks {
		if k := m.held(lk.lockKey); k != nil && k.owner == lk.owner && k.token == lk.token {
			k.until = sent.Add(ttls[i])
			out[i] = renewHeld
		} else {
			out[i] = renewGone
		}
	}
	return out, sent, nil
}

func (b memBackend) ttl(_ context.Context, lk *Lock) (time.Duration, error) {
	b.m.mu.Lock()
	defer b.m.mu.Unlock()
	if k := b.m.held(lk.lockKey); k != nil && k.owner == lk.owner && k.token == lk.token {
		return time.Until(k.until), nil
	}
	return -1, nil
}

func (b memBackend) releaseAll(locks []*Lock) error {
	for _, lk := range locks {
		_, _, _ = b.release(context.Background(), lk)
	}
	return nil
}

func (b memBackend) targets(string) []target                     { return nil }
func (b memBackend) client() redis.UniversalClient               { return nil }
func (b memBackend) releaseKeys(lockKey string) ([2]string, int) { return [2]string{lockKey}, 1 }
func (b memBackend) handOff() bool                               { return false }
func (b memBackend) replicaAck() bool                            { return false }

func newMemory() *memory { return &memory{locks: map[string]*memLock{}} }

// Through the seam alone: two Lockers on one memory backend exclude each
// other, and every token is larger than the one before.
func TestSeamMutualExclusion(t *testing.T) {
	m := newMemory()
	lockers := []*Locker{memLocker(t, m), memLocker(t, m)}
	var inside atomic.Int32
	var last int64
	var wg sync.WaitGroup
	for _, l := range lockers {
		for range 4 {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				for range 30 {
					lk, err := l.Lock(ctx, "x", WithRetry(time.Millisecond, 5*time.Millisecond))
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, int32(1), inside.Add(1), "two holders at once")
					assert.Greater(t, lk.Token(), last)
					last = lk.Token()
					inside.Add(-1)
					assert.NoError(t, lk.Unlock(ctx))
				}
			})
		}
	}
	wg.Wait()
}

// Waiters of one Locker get the lock in arrival order, woken by the local
// Unlock.
func TestSeamWaitingOrder(t *testing.T) {
	l := memLocker(t, newMemory())
	ctx := context.Background()
	lk, err := l.Lock(ctx, "q")
	require.NoError(t, err)
	order := make(chan int, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			w, err := l.Lock(ctx, "q", WithRetry(time.Second, time.Second))
			if assert.NoError(t, err) {
				order <- i
				assert.NoError(t, w.Unlock(ctx))
			}
		})
		require.Eventually(t, func() bool { return waiters(l, "q") == i+1 }, 5*time.Second, time.Millisecond)
	}
	require.NoError(t, lk.Unlock(ctx))
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		assert.Equal(t, want, got, "arrival order")
		want++
	}
}

// waiters counts the calls of l queued for key.
func waiters(l *Locker, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := l.queues[key]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// Reentrancy, through the context (locally) and through an owner id (in the
// backend): the same token, and the last Unlock releases.
func TestSeamReentrancy(t *testing.T) {
	m := newMemory()
	a, b := memLocker(t, m), memLocker(t, m)
	ctx := context.Background()
	lk, err := a.Lock(ctx, "r")
	require.NoError(t, err)
	again, err := a.Lock(lk.Context(), "r")
	require.NoError(t, err)
	assert.Same(t, lk, again)
	require.NoError(t, again.Unlock(ctx))
	_, err = b.TryLock(ctx, "r")
	assert.ErrorIs(t, err, ErrNotAcquired, "the inner Unlock released")
	require.NoError(t, lk.Unlock(ctx))

	o1, err := a.Lock(ctx, "o", WithOwner("job-7"))
	require.NoError(t, err)
	o2, err := b.Lock(ctx, "o", WithOwner("job-7"))
	require.NoError(t, err)
	assert.Equal(t, o1.Token(), o2.Token())
	require.NoError(t, o2.Unlock(ctx))
	require.NoError(t, o1.Unlock(ctx))
}

// Renewal keeps a lock past many leases; when the backend no longer holds
// it, the next renewal ends the lock's context with ErrLockLost.
func TestSeamRenewalAndLoss(t *testing.T) {
	m := newMemory()
	l := memLocker(t, m)
	ctx := context.Background()
	lk, err := l.Lock(ctx, "n", WithTTL(60*time.Millisecond))
	require.NoError(t, err)
	start := m.extends.Load()
	require.Eventually(t, func() bool { return m.extends.Load() >= start+5 }, 10*time.Second, time.Millisecond,
		"renewals through the seam")
	require.NoError(t, lk.Context().Err(), "renewed: still held after five renewals of a 60ms lease")

	m.mu.Lock()
	delete(m.locks, lk.lockKey)
	m.mu.Unlock()
	select {
	case <-lk.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the loss was never signalled")
	}
	assert.ErrorIs(t, context.Cause(lk.Context()), ErrLockLost)
	assert.ErrorIs(t, lk.Unlock(ctx), ErrNotHeld)
}
