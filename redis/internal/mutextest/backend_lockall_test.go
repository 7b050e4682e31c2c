package mutextest

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// batching is a watching memory that is also a backend.Batcher: a key's
// group is its last byte's parity.
type batching struct {
	watching
	calls   atomic.Int64 // AcquireAll calls
	failAll error        // every AcquireAll fails with it, when set
	grants  func([]backend.Grant) []backend.Grant
}

func (b *batching) Group(key string) int { return int(key[len(key)-1]) % 2 }

func (b *batching) AcquireAll(_ context.Context, as []backend.Attempt) ([]backend.Grant, int, error) {
	b.calls.Add(1)
	m := b.memory
	m.mu.Lock()
	defer m.mu.Unlock()
	if b.failAll != nil {
		return nil, -1, b.failAll
	}
	for i, a := range as {
		if b.Group(a.Key) != b.Group(as[0].Key) {
			return nil, -1, errors.New("two groups in one AcquireAll")
		}
		if k := m.held(a.Key); k != nil && k.owner != a.Owner {
			return nil, i, nil
		}
	}
	grants := make([]backend.Grant, len(as))
	for i, a := range as {
		grants[i] = m.acquireLocked(a)
	}
	if b.grants != nil {
		grants = b.grants(grants)
	}
	return grants, -1, nil
}

var _ backend.Batcher = (*batching)(nil)

// waiterOwner is the owner of a waiter whose retries countAcquires leaves
// out: it polls the backend at its own pace while a test counts.
const waiterOwner = "waiter"

// countAcquires counts m's Acquire calls, except the waiter's.
func countAcquires(m *memory) *atomic.Int64 {
	var n atomic.Int64
	m.onAcquire = func(a backend.Attempt) {
		if a.Owner != waiterOwner {
			n.Add(1)
		}
	}
	return &n
}

// Any backend of the contract takes several keys through the ordered path,
// one key at a time: no deadlock, no two holders, money conserved.
func TestBackendLockAllTransfers(t *testing.T) {
	m := watching{newMemory()}
	lockers := []*mutex.Locker{memLocker(t, m), memLocker(t, m)}
	transfers(t, lockers, accounts(lockers[0]), 16, 100)
}

// A Batcher's groups go in one AcquireAll each, in the order (group, key);
// a group with a busy key goes key by key, waiting.
func TestBackendLockAllBatches(t *testing.T) {
	b := &batching{watching: watching{newMemory()}}
	acquires := countAcquires(b.memory)
	l, other := memLocker(t, b), memLocker(t, b)
	ctx := seamCtx(t)
	assert.Equal(t, []string{"k2", "k4", "k1", "k3"}, mutexhooks.OrderOf(l, []string{"k4", "k3", "k2", "k1", "k3"}))
	ls, err := l.LockAll(ctx, []string{"k4", "k3", "k2", "k1", "k3"})
	require.NoError(t, err)
	assert.EqualValues(t, 2, b.calls.Load(), "one AcquireAll per group")
	assert.Zero(t, acquires.Load(), "no key on its own")
	assert.Equal(t, []string{"k2", "k4", "k1", "k3"}, ls.Keys())
	require.NoError(t, ls.Release(ctx))

	lk, err := other.Lock(ctx, "k3", mutex.WithTTL(100*time.Millisecond), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	ls, err = l.LockAll(ctx, []string{"k1", "k3"}, mutex.WithRetry(time.Millisecond, 10*time.Millisecond))
	require.NoError(t, err, "taken key by key once k3's lease ran out")
	assert.Greater(t, ls.TokenOf("k3"), lk.Token())
	assert.EqualValues(t, 3, b.calls.Load())
	assert.Positive(t, acquires.Load(), "the busy group went key by key")
	require.NoError(t, ls.Release(ctx))

	// Calls of this Locker waiting for a key go first: TryLockAll refuses
	// without asking the backend, as TryLock does.
	lk, err = other.Lock(ctx, "k2")
	require.NoError(t, err)
	waiting := make(chan error, 1)
	go func() {
		w, err := l.Lock(ctx, "k2", mutex.WithOwner(waiterOwner))
		if err == nil {
			err = w.Release(ctx)
		}
		waiting <- err
	}()
	require.Eventually(t, func() bool { return mutexhooks.WaitersOf(l, "k2") == 1 }, 10*time.Second, time.Millisecond)
	calls, tries := b.calls.Load(), acquires.Load()
	_, err = l.TryLockAll(ctx, []string{"k4", "k2"})
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.Equal(t, calls, b.calls.Load(), "no AcquireAll")
	assert.Equal(t, tries, acquires.Load(), "no Acquire")
	require.NoError(t, lk.Release(ctx))
	require.NoError(t, <-waiting)
}

// An AcquireAll that fails leaves each key's outcome unknown: each is
// abandoned under the attempt's owner. LockAll goes on key by key;
// TryLockAll reports the outage.
func TestBackendLockAllBatchFailure(t *testing.T) {
	boom := errors.New("store unreachable")
	b := &batching{watching: watching{newMemory()}, failAll: boom}
	b.abandons = make(chan string, 8)
	l := memLocker(t, b)
	ctx := seamCtx(t)
	_, err := l.TryLockAll(ctx, []string{"a2", "b2"})
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorIs(t, err, boom)
	owner := abandoned(ctx, t, b.memory)
	assert.Equal(t, owner, abandoned(ctx, t, b.memory), "both keys, under the attempt's owner")

	ls, err := l.LockAll(ctx, []string{"a2", "b2"})
	require.NoError(t, err, "key by key after the failed group")
	abandoned(ctx, t, b.memory)
	abandoned(ctx, t, b.memory)
	require.NoError(t, ls.Release(ctx))

	// A grant without a token would break every fence: refused, abandoned.
	b.failAll = nil
	b.grants = func(gs []backend.Grant) []backend.Grant { gs[1].Token = 0; return gs }
	_, err = l.TryLockAll(ctx, []string{"a2", "b2"})
	assert.ErrorContains(t, err, "token 0")
	abandoned(ctx, t, b.memory)
	abandoned(ctx, t, b.memory)
}

// Re-entry: a set's context re-enters its keys with Lock and LockAll, same
// tokens, and only the last Unlock releases.
func TestBackendLockAllReentrancy(t *testing.T) {
	b := &batching{watching: watching{newMemory()}}
	l, other := memLocker(t, b), memLocker(t, b)
	ctx := seamCtx(t)
	ls, err := l.LockAll(ctx, []string{"r4", "r2"})
	require.NoError(t, err)
	lk, err := l.Lock(ls.Context(), "r4")
	require.NoError(t, err)
	assert.Equal(t, ls.TokenOf("r4"), lk.Token())
	inner, err := l.LockAll(ls.Context(), []string{"r2", "r4"})
	require.NoError(t, err)
	assert.Equal(t, ls.TokenOf("r2"), inner.TokenOf("r2"))
	assert.EqualValues(t, 1, b.calls.Load(), "the re-entries asked nothing")
	require.NoError(t, inner.Release(ctx))
	require.NoError(t, lk.Release(ctx))
	_, err = other.TryLockAll(ctx, []string{"r4"})
	assert.ErrorIs(t, err, mutex.ErrNotAcquired, "the outer set still holds r1")
	require.NoError(t, ls.Context().Err())
	require.NoError(t, ls.Release(ctx))
	ls, err = other.TryLockAll(ctx, []string{"r4", "r2"})
	require.NoError(t, err)
	require.NoError(t, ls.Release(ctx))

	o1, err := l.LockAll(ctx, []string{"o1", "o2"}, mutex.WithOwner("job-7"))
	require.NoError(t, err)
	o2, err := other.LockAll(ctx, []string{"o2", "o3"}, mutex.WithOwner("job-7"))
	require.NoError(t, err, "the same owner re-enters o2 in the backend")
	assert.Equal(t, o1.TokenOf("o2"), o2.TokenOf("o2"))
	require.NoError(t, o2.Release(ctx))
	owner, held := b.holder("o2")
	assert.True(t, held)
	assert.Equal(t, "job-7", owner)
	require.NoError(t, o1.Release(ctx))
}

// DoAll's fn runs holding every key, on a context that ends when one is
// lost; the keys are released afterwards, also after a panic.
func TestBackendDoAll(t *testing.T) {
	m := newMemory()
	l := memLocker(t, m)
	ctx := seamCtx(t)
	err := l.DoAll(ctx, []string{"d1", "d2"}, func(ctx context.Context, ls *mutex.Locks) error {
		m.drop("d2")
		<-ctx.Done()
		assert.ErrorIs(t, context.Cause(ctx), mutex.ErrLockLost)
		return context.Cause(ctx)
	}, mutex.WithTTL(50*time.Millisecond))
	assert.ErrorIs(t, err, mutex.ErrLockLost)
	_, held := m.holder("d1")
	assert.False(t, held, "d1 released")

	assert.Panics(t, func() {
		_ = l.DoAll(ctx, []string{"d1", "d2"}, func(context.Context, *mutex.Locks) error { panic("boom") })
	})
	_, held = m.holder("d1")
	assert.False(t, held, "released after the panic")
}

// Bad input gets ErrInvalid, and nothing reaches the backend.
func TestBackendLockAllBadInput(t *testing.T) {
	b := &batching{watching: watching{newMemory()}}
	acquires := countAcquires(b.memory)
	l := memLocker(t, b)
	ctx := context.Background()
	var nilCtx context.Context
	var nilLocker *mutex.Locker
	many := make([]string, mutex.MaxKeys+1)
	for i := range many {
		many[i] = "k"
	}
	noop := func(context.Context, *mutex.Locks) error { return nil }
	cases := map[string]func() error{
		"no keys":   func() error { _, err := l.LockAll(ctx, nil); return err },
		"empty key": func() error { _, err := l.LockAll(ctx, []string{"a", ""}); return err },
		"key over limit": func() error {
			_, err := l.TryLockAll(ctx, []string{strings.Repeat("k", mutex.MaxKeyLen+1)})
			return err
		},
		"too many keys": func() error { _, err := l.LockAll(ctx, many); return err },
		"nil context":   func() error { _, err := l.LockAll(nilCtx, []string{"a"}); return err },
		"nil Locker":    func() error { _, err := nilLocker.TryLockAll(ctx, []string{"a"}); return err },
		"bad option":    func() error { _, err := l.LockAll(ctx, []string{"a"}, mutex.WithTTL(0)); return err },
		"replica ack": func() error {
			_, err := l.LockAll(ctx, []string{"a"}, mutex.WithReplicaAck(1, time.Second))
			return err
		},
		"nil fn":         func() error { return l.DoAll(ctx, []string{"a"}, nil) },
		"DoAll no keys":  func() error { return l.DoAll(ctx, nil, noop) },
		"Unlock nil ctx": func() error { ls, _ := l.LockAll(ctx, []string{"u"}); defer ls.Release(ctx); return ls.Release(nilCtx) },
		"Extend nil ctx": func() error {
			ls, _ := l.LockAll(ctx, []string{"u"})
			defer ls.Release(ctx)
			return ls.Extend(nilCtx, time.Second)
		},
		"Extend below min": func() error {
			ls, _ := l.LockAll(ctx, []string{"u"})
			defer ls.Release(ctx)
			return ls.Extend(ctx, time.Millisecond)
		},
	}
	for name, call := range cases {
		t.Run(name, func(t *testing.T) {
			before := acquires.Load() + b.calls.Load()
			err := testutil.Safely(t, 5*time.Second, call)
			assert.ErrorIs(t, err, mutex.ErrInvalid)
			if !strings.Contains(name, "ctx") && !strings.Contains(name, "below") {
				assert.Equal(t, before, acquires.Load()+b.calls.Load(), "nothing reached the backend")
			}
		})
	}
	var nilSet *mutex.Locks
	assert.ErrorIs(t, nilSet.Release(ctx), mutex.ErrNotHeld)
	assert.ErrorIs(t, nilSet.Extend(ctx, time.Second), mutex.ErrNotHeld)
	assert.ErrorIs(t, context.Cause(nilSet.Context()), mutex.ErrNotHeld)
	assert.Nil(t, nilSet.Keys())
	assert.Zero(t, nilSet.TokenOf("a"))
	assert.Zero(t, nilSet.Token())
	assert.True(t, nilSet.Deadline().IsZero())
}

// A set is a mutex.Hold: its Token is the largest of its keys' tokens, and
// a later LockAll of the same keys has a larger one (each key's grew); its
// Deadline is the earliest of its keys' local deadlines, here a key
// re-entered from a shorter lease.
func TestBackendLocksTokenAndDeadline(t *testing.T) {
	m := watching{newMemory()}
	l := memLocker(t, m)
	ctx := seamCtx(t)
	var hold mutex.Hold
	ls, err := l.LockAll(ctx, []string{"c", "a", "b"}, mutex.WithTTL(time.Hour), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	hold = ls
	largest := max(ls.TokenOf("a"), ls.TokenOf("b"), ls.TokenOf("c"))
	assert.Equal(t, largest, hold.Token(), "the largest of the keys' tokens")
	assert.Positive(t, ls.TokenOf("a"))
	assert.NotEqual(t, ls.TokenOf("a"), ls.TokenOf("c"), "a token per key")
	require.NoError(t, ls.Release(ctx))

	again, err := l.LockAll(ctx, []string{"b", "c", "a"}, mutex.WithTTL(time.Hour), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	assert.Greater(t, again.Token(), largest, "a later set of the same keys fences the earlier out")
	for _, k := range []string{"a", "b", "c"} {
		assert.Greater(t, again.TokenOf(k), ls.TokenOf(k), k)
		assert.LessOrEqual(t, again.TokenOf(k), again.Token(), k)
	}
	require.NoError(t, again.Release(ctx))

	before := time.Now()
	short, err := l.Lock(ctx, "b", mutex.WithTTL(time.Minute), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	set, err := l.LockAll(short.Context(), []string{"a", "b", "c"}, mutex.WithTTL(time.Hour), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	hold = set
	assert.Equal(t, short.Deadline(), hold.Deadline(), "the re-entered key's deadline is the earliest")
	assert.WithinRange(t, set.Deadline(), before.Add(time.Minute-time.Second), time.Now().Add(time.Minute))
	require.NoError(t, set.Release(ctx))
	require.NoError(t, short.Release(ctx))

	set, err = l.LockAll(ctx, []string{"a", "b"}, mutex.WithTTL(time.Hour), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	assert.WithinRange(t, set.Deadline(), time.Now().Add(time.Hour-time.Minute), time.Now().Add(time.Hour),
		"an hour's lease less the drift margin")
	require.NoError(t, set.Release(ctx))
}
