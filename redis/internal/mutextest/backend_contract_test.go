package mutextest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redisdriver"
)

// memory is a deliberately simple backend.Backend, in memory and outside
// package mutex: the Locker's behaviour (exclusion, waiting order, wake-ups,
// reentrancy, renewal, the loss signal) runs through package backend's
// interfaces alone, with no Redis. It keeps package backend's contract;
// watching makes one a backend.Watcher too.
type memory struct {
	mu        sync.Mutex
	locks     map[string]*memLock
	last      int64 // the last token issued
	watchers  map[string]map[*func()]bool
	extends   atomic.Int64
	abandons  chan string // owners abandoned, when not nil
	fail      error       // every Acquire fails with it, when set
	grant     *backend.Grant
	onAcquire func(backend.Attempt)                            // called in every Acquire, when set
	extend    func([]backend.Lease) ([]backend.Renewal, error) // replaces Extend, when set
}

type memLock struct {
	owner string
	token int64
	count int64
	until time.Time
	since time.Time // when token was issued
}

func newMemory() *memory {
	return &memory{locks: map[string]*memLock{}, watchers: map[string]map[*func()]bool{}}
}

// held returns the live lock on key, under m.mu.
func (m *memory) held(key string) *memLock {
	k := m.locks[key]
	if k == nil || !time.Now().Before(k.until) {
		return nil
	}
	return k
}

func (m *memory) holds(l backend.Lease) *memLock {
	if k := m.held(l.Key); k != nil && k.owner == l.Owner && k.token == l.Token {
		return k
	}
	return nil
}

// free deletes key and wakes its watchers, under m.mu.
func (m *memory) free(key string) {
	delete(m.locks, key)
	for wake := range m.watchers[key] {
		(*wake)()
	}
}

func (m *memory) Acquire(_ context.Context, a backend.Attempt) (backend.Grant, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.onAcquire != nil {
		m.onAcquire(a)
	}
	if m.fail != nil {
		return backend.Grant{}, m.fail
	}
	if m.grant != nil {
		return *m.grant, nil
	}
	return m.acquireLocked(a), nil
}

// acquireLocked is one attempt, under m.mu.
func (m *memory) acquireLocked(a backend.Attempt) backend.Grant {
	if k := m.held(a.Key); k != nil {
		if k.owner != a.Owner {
			return backend.Grant{Status: backend.Held, Remaining: time.Until(k.until)}
		}
		k.count++
		k.until = time.Now().Add(a.TTL)
		return backend.Grant{Status: backend.Reentered, Token: k.token}
	}
	m.last++
	now := time.Now()
	m.locks[a.Key] = &memLock{owner: a.Owner, token: m.last, count: 1, until: now.Add(a.TTL), since: now}
	return backend.Grant{Status: backend.Acquired, Token: m.last}
}

func (m *memory) Release(_ context.Context, l backend.Lease) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.holds(l)
	if k == nil {
		return -1, nil
	}
	if k.count--; k.count == 0 {
		m.free(l.Key)
	}
	return k.count, nil
}

func (m *memory) Extend(_ context.Context, leases []backend.Lease) ([]backend.Renewal, error) {
	m.extends.Add(1)
	sent := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.extend != nil {
		return m.extend(leases)
	}
	out := make([]backend.Renewal, len(leases))
	for i, l := range leases {
		out[i] = backend.Gone
		if k := m.holds(l); k != nil {
			k.until = sent.Add(l.TTL)
			out[i] = backend.Renewed
		}
	}
	return out, nil
}

func (m *memory) TTL(_ context.Context, l backend.Lease) (time.Duration, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.holds(l); k != nil {
		return time.Until(k.until), nil
	}
	return -1, nil
}

func (m *memory) Abandon(_ context.Context, key, owner string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.held(key); k != nil && k.owner == owner {
		m.free(key)
	}
	if m.abandons != nil {
		m.abandons <- owner
	}
	return nil
}

// drop takes key away from its holder, as an expiry or another's forced
// release would.
func (m *memory) drop(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.free(key)
}

func (m *memory) holder(key string) (owner string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k := m.held(key); k != nil {
		return k.owner, true
	}
	return "", false
}

// watching is a memory that is also a backend.Watcher.
type watching struct{ *memory }

func (w watching) Watch(key string, wake func()) (<-chan struct{}, func()) {
	m := w.memory
	m.mu.Lock()
	defer m.mu.Unlock()
	p := &wake
	if m.watchers[key] == nil {
		m.watchers[key] = map[*func()]bool{}
	}
	m.watchers[key][p] = true
	return nil, func() {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.watchers[key], p)
	}
}

// watched counts the watches of every key.
func (w watching) watched() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, ws := range w.watchers {
		n += len(ws)
	}
	return n
}

var (
	_ backend.Backend = (*memory)(nil)
	_ backend.Watcher = watching{}
)

// memLocker is a Locker over b and nothing else, whose Close at the
// test's end must succeed; its keys reach b as given.
func memLocker(t *testing.T, b backend.Backend, opts ...mutex.Option) *mutex.Locker {
	t.Helper()
	l, err := mutex.New(b, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// abandoned waits for the next Abandon, failing at ctx's end.
func abandoned(ctx context.Context, t *testing.T, m *memory) string {
	t.Helper()
	select {
	case owner := <-m.abandons:
		return owner
	case <-ctx.Done():
		t.Fatal("nothing was abandoned")
		return ""
	}
}

func seamCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Two Lockers on one backend exclude each other, and every token is larger
// than the one before.
func TestBackendMutualExclusion(t *testing.T) {
	m := watching{newMemory()}
	lockers := []*mutex.Locker{memLocker(t, m), memLocker(t, m)}
	ctx := seamCtx(t)
	var inside atomic.Int32
	var last int64
	var wg sync.WaitGroup
	for _, l := range lockers {
		for range 4 {
			wg.Go(func() {
				for range 30 {
					lk, err := l.Lock(ctx, "x", mutex.WithRetry(time.Millisecond, 5*time.Millisecond))
					if !assert.NoError(t, err) {
						return
					}
					assert.Equal(t, int32(1), inside.Add(1), "two holders at once")
					assert.Greater(t, lk.Token(), last)
					last = lk.Token()
					inside.Add(-1)
					assert.NoError(t, lk.Release(ctx))
				}
			})
		}
	}
	wg.Wait()
}

// Waiters of one Locker get the lock in arrival order, each woken by the
// Unlock before it: the poll (an hour) could not have.
func TestBackendWaitingOrderAndHandOff(t *testing.T) {
	l := memLocker(t, newMemory())
	ctx := seamCtx(t)
	lk, err := l.Lock(ctx, "q")
	require.NoError(t, err)
	order := make(chan int, 5)
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			w, err := l.Lock(ctx, "q", mutex.WithRetry(time.Hour, time.Hour), mutex.WithTTL(time.Hour))
			if assert.NoError(t, err) {
				order <- i
				assert.NoError(t, w.Release(ctx))
			}
		})
		require.Eventually(t, func() bool { return mutexhooks.WaitersOf(l, "q") == i+1 }, 10*time.Second, time.Millisecond)
	}
	require.NoError(t, lk.Release(ctx))
	wg.Wait()
	close(order)
	want := 0
	for got := range order {
		assert.Equal(t, want, got, "arrival order")
		want++
	}
}

// A waiter of another Locker is woken by the backend's Watcher when the
// holder releases: its poll, bounded by the holder's lease of an hour,
// would not come within the test's minute. The watch ends with the wait.
func TestBackendWatcherWakesOtherLockers(t *testing.T) {
	m := watching{newMemory()}
	a, b := memLocker(t, m), memLocker(t, m)
	ctx := seamCtx(t)
	lk, err := a.Lock(ctx, "w", mutex.WithTTL(time.Hour))
	require.NoError(t, err)
	got, errs := make(chan *mutex.Lock, 1), make(chan error, 1)
	go func() {
		w, err := b.Lock(ctx, "w", mutex.WithRetry(time.Hour, time.Hour))
		errs <- err
		got <- w
	}()
	require.Eventually(t, func() bool { return m.watched() == 1 }, 10*time.Second, time.Millisecond,
		"the waiter asked the backend to watch the key")
	require.NoError(t, lk.Release(ctx))
	require.NoError(t, <-errs)
	w := <-got
	assert.Greater(t, w.Token(), lk.Token())
	assert.Zero(t, m.watched(), "nobody waits: the watch stopped")
	require.NoError(t, w.Release(ctx))
}

// Without a Watcher, a waiter of another Locker polls, each poll bounded by
// the holder's remaining lease, not by its hour-long retry.
func TestBackendPollWithoutWatcher(t *testing.T) {
	m := newMemory()
	a, b := memLocker(t, m), memLocker(t, m)
	ctx := seamCtx(t)
	lk, err := a.Lock(ctx, "p", mutex.WithTTL(100*time.Millisecond), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	w, err := b.Lock(ctx, "p", mutex.WithRetry(time.Hour, time.Hour))
	require.NoError(t, err, "the poll found the lease over")
	assert.Greater(t, w.Token(), lk.Token())
	assert.ErrorIs(t, lk.Release(ctx), mutex.ErrNotHeld, "the first lease ran out")
	require.NoError(t, w.Release(ctx))
}

// Reentrancy, through the context (locally) and through an owner id (in the
// backend): the same token, and only the last Unlock releases.
func TestBackendReentrancy(t *testing.T) {
	m := newMemory()
	a, b := memLocker(t, m), memLocker(t, m)
	ctx := seamCtx(t)
	lk, err := a.Lock(ctx, "r")
	require.NoError(t, err)
	again, err := a.Lock(lk.Context(), "r")
	require.NoError(t, err)
	assert.Same(t, lk, again)
	require.NoError(t, again.Release(ctx))
	_, err = b.TryLock(ctx, "r")
	assert.ErrorIs(t, err, mutex.ErrNotAcquired, "the inner Unlock kept the lock")
	require.NoError(t, lk.Release(ctx))

	o1, err := a.Lock(ctx, "o", mutex.WithOwner("job-7"))
	require.NoError(t, err)
	o2, err := b.Lock(ctx, "o", mutex.WithOwner("job-7"))
	require.NoError(t, err)
	assert.Equal(t, o1.Token(), o2.Token())
	require.NoError(t, o2.Release(ctx))
	owner, held := m.holder("o")
	assert.True(t, held, "one count left")
	assert.Equal(t, "job-7", owner)
	require.NoError(t, o1.Release(ctx))
	_, held = m.holder("o")
	assert.False(t, held)
}

// Renewal keeps a lock past many leases; when the backend no longer holds
// it, the next renewal ends the lock's context with ErrLockLost.
func TestBackendRenewalAndLoss(t *testing.T) {
	m := newMemory()
	l := memLocker(t, m)
	ctx := seamCtx(t)
	// A renewal may come two thirds of a lease (400 ms) late, which a busy
	// host's timers do not reach.
	lk, err := l.Lock(ctx, "n", mutex.WithTTL(600*time.Millisecond))
	require.NoError(t, err)
	start := m.extends.Load()
	require.Eventually(t, func() bool { return m.extends.Load() >= start+5 }, 30*time.Second, time.Millisecond,
		"renewals through the seam")
	require.NoError(t, lk.Context().Err(), "renewed: still held after five renewals of a 600ms lease")
	left, err := lk.TTL(ctx)
	require.NoError(t, err)
	assert.Positive(t, left)

	m.drop("n")
	select {
	case <-lk.Context().Done():
	case <-ctx.Done():
		t.Fatal("the loss was never signalled")
	}
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	assert.ErrorIs(t, lk.Release(ctx), mutex.ErrNotHeld)
}

// Keys reach the backend as the caller gives them, with no prefix of the
// Locker's (a prefix is the driver's), and Close releases what the Locker
// holds there.
func TestBackendKeysAndClose(t *testing.T) {
	m := newMemory()
	l, err := mutex.New(m)
	require.NoError(t, err)
	lk, err := l.Lock(seamCtx(t), "app:k")
	require.NoError(t, err)
	_, held := m.holder("app:k")
	assert.True(t, held)
	m.mu.Lock()
	keys := slices.Collect(maps.Keys(m.locks))
	m.mu.Unlock()
	assert.Equal(t, []string{"app:k"}, keys, "the key as given, and nothing else")
	require.NoError(t, l.Close())
	_, held = m.holder("app:k")
	assert.False(t, held, "Close released it")
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrReleased)
	assert.Nil(t, redisdriver.ClientOf(l.Backend()), "no Redis client to lend adapters")
	assert.Equal(t, backend.Backend(m), l.Backend(), "adapters reach the backend given, for its capabilities")
}

// closing is a memory that is an io.Closer, counting its Close calls and
// failing them with err.
type closing struct {
	*memory
	closes atomic.Int32
	err    error
}

func (c *closing) Close() error {
	c.closes.Add(1)
	return c.err
}

// The Locker owns its backend: Close closes one that is an io.Closer,
// once however often the Locker is closed, after releasing what it held
// there, and returns the backend's error; one that is no io.Closer is left
// as it is.
func TestBackendCloseClosesTheBackend(t *testing.T) {
	ctx := seamCtx(t)
	b := &closing{memory: newMemory()}
	l, err := mutex.New(b)
	require.NoError(t, err)
	lk, err := l.Lock(ctx, "k")
	require.NoError(t, err)
	assert.Zero(t, b.closes.Load(), "New does not close it")
	require.NoError(t, l.Close())
	assert.EqualValues(t, 1, b.closes.Load())
	_, held := b.holder("k")
	assert.False(t, held, "released before the backend closed")
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrReleased)
	require.NoError(t, l.Close(), "a second Close")
	assert.EqualValues(t, 1, b.closes.Load(), "closed once")

	boom := errors.New("close failed")
	failing := &closing{memory: newMemory(), err: boom}
	l, err = mutex.New(failing)
	require.NoError(t, err)
	assert.ErrorIs(t, l.Close(), boom, "the backend's Close error is Close's")
	assert.EqualValues(t, 1, failing.closes.Load())

	// A backend that is no io.Closer still works after the Locker closed.
	m := newMemory()
	l, err = mutex.New(m)
	require.NoError(t, err)
	require.NoError(t, l.Close())
	g, err := m.Acquire(ctx, backend.Attempt{Key: "after", Owner: "o", TTL: time.Second})
	require.NoError(t, err)
	assert.Equal(t, backend.Acquired, g.Status)
}

// A backend that fails is an outage, with its error; what the failed
// attempt might have taken is abandoned under that attempt's owner.
func TestBackendErrors(t *testing.T) {
	boom := errors.New("store unreachable")
	m := newMemory()
	m.fail, m.abandons = boom, make(chan string, 1)
	l := memLocker(t, m)
	ctx := seamCtx(t)
	_, err := l.TryLock(ctx, "e")
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorIs(t, err, boom)
	assert.NotEmpty(t, abandoned(ctx, t, m), "the attempt's owner was abandoned")

	// A grant without a token would break every fence: refused, abandoned.
	m.mu.Lock()
	m.fail, m.grant = nil, &backend.Grant{Status: backend.Acquired}
	m.mu.Unlock()
	_, err = l.TryLock(ctx, "e")
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorContains(t, err, "token 0")
	assert.NotEmpty(t, abandoned(ctx, t, m))

	m.mu.Lock()
	m.grant = &backend.Grant{Status: 7, Token: 1}
	m.mu.Unlock()
	_, err = l.TryLock(ctx, "e")
	assert.ErrorContains(t, err, "status 7")
	abandoned(ctx, t, m)
}

func TestBackendNilBackend(t *testing.T) {
	for name, b := range map[string]backend.Backend{"nil": nil, "typed nil": (*memory)(nil)} {
		t.Run(name, func(t *testing.T) {
			l, err := mutex.New(b)
			assert.ErrorIs(t, err, mutex.ErrInvalid)
			assert.Nil(t, l)
			_, err = l.TryLock(context.Background(), "k")
			assert.ErrorIs(t, err, mutex.ErrInvalid)
			assert.Nil(t, l.Backend())
			assert.NoError(t, l.Close())
		})
	}
	assert.Nil(t, (*mutex.Locker)(nil).Backend())
	l := memLocker(t, newMemory())
	_, err := l.TryLock(context.Background(), "k", mutex.WithReplicaAck(1, time.Second))
	assert.ErrorIs(t, err, mutex.ErrInvalid)
}

// A backend error on an attempt with the caller's owner id frees nothing:
// another holder may share that id.
func TestBackendNoAbandonOfAGivenOwner(t *testing.T) {
	m := newMemory()
	m.fail, m.abandons = errors.New("store unreachable"), make(chan string, 4)
	l, err := mutex.New(m)
	require.NoError(t, err)
	_, err = l.TryLock(seamCtx(t), "g", mutex.WithOwner("job-7"))
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	require.NoError(t, l.Close()) // waits for the Locker's background work
	assert.Empty(t, m.abandons)
}

// A grant that arrives after its lease ran out (by the Locker's clock) is
// refused and abandoned, never handed out already lost.
func TestBackendLateGrant(t *testing.T) {
	var skew atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
	m := newMemory()
	m.abandons = make(chan string, 1)
	m.onAcquire = func(backend.Attempt) { skew.Add(int64(time.Hour)) }
	l := memLocker(t, m, mutex.WithClock(clock))
	ctx := seamCtx(t)
	_, err := l.TryLock(ctx, "late", mutex.WithTTL(time.Minute))
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorContains(t, err, "longer than the lease")
	assert.NotEmpty(t, abandoned(ctx, t, m))
}

// Renewals with no answer (an error, Unknown, or the wrong number of
// results) do not keep a lock: it is lost when its lease deadline passes.
func TestBackendRenewalWithoutAnswer(t *testing.T) {
	cases := map[string]func([]backend.Lease) ([]backend.Renewal, error){
		"error":        func(ls []backend.Lease) ([]backend.Renewal, error) { return nil, errors.New("timeout") },
		"unknown":      func(ls []backend.Lease) ([]backend.Renewal, error) { return make([]backend.Renewal, len(ls)), nil },
		"wrong length": func([]backend.Lease) ([]backend.Renewal, error) { return []backend.Renewal{}, nil },
		"too many": func(ls []backend.Lease) ([]backend.Renewal, error) {
			out := make([]backend.Renewal, len(ls)+1)
			for i := range out {
				out[i] = backend.Renewed
			}
			return out, nil
		},
	}
	for name, extend := range cases {
		t.Run(name, func(t *testing.T) {
			m := newMemory()
			m.extend = extend
			l := memLocker(t, m)
			ctx := seamCtx(t)
			lk, err := l.Lock(ctx, "u", mutex.WithTTL(60*time.Millisecond))
			require.NoError(t, err)
			select {
			case <-lk.Context().Done():
			case <-ctx.Done():
				t.Fatal("a lock whose renewals got no answer was kept")
			}
			assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
			assert.GreaterOrEqual(t, m.extends.Load(), int64(1), "renewal was tried")
		})
	}
}

// TTL over the backend: the backend's answer, and ErrNotHeld (with the
// loss signal) once the backend no longer holds the lock.
func TestBackendTTL(t *testing.T) {
	m := newMemory()
	l := memLocker(t, m)
	ctx := seamCtx(t)
	lk, err := l.Lock(ctx, "t", mutex.WithTTL(time.Hour), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	left, err := lk.TTL(ctx)
	require.NoError(t, err)
	assert.Greater(t, left, 59*time.Minute)
	m.drop("t")
	_, err = lk.TTL(ctx)
	assert.ErrorIs(t, err, mutex.ErrNotHeld)
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
}

// A Watcher that wakes from inside Watch and gives no stop func: the
// Locker neither deadlocks nor panics, and the waiter still gets the lock.
type eagerWatcher struct{ *memory }

func (w eagerWatcher) Watch(_ string, wake func()) (<-chan struct{}, func()) {
	wake()
	return nil, nil
}

func TestBackendEagerWatcher(t *testing.T) {
	m := eagerWatcher{newMemory()}
	a, b := memLocker(t, m), memLocker(t, m)
	ctx := seamCtx(t)
	lk, err := a.Lock(ctx, "e", mutex.WithTTL(100*time.Millisecond), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	w, err := b.Lock(ctx, "e", mutex.WithRetry(time.Hour, time.Hour))
	require.NoError(t, err)
	assert.Greater(t, w.Token(), lk.Token())
	require.NoError(t, w.Release(ctx))
}
