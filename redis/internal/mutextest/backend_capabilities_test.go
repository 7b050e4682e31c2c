package mutextest

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	httplock "github.com/redfence/redfence/redis/httplock"
	"github.com/redfence/redfence/redis/redisdriver"
)

// handing is a memory whose grants carry a handle of their own, and which
// records the handles its Leases come back with.
type handing struct {
	*memory
	mu   sync.Mutex
	seen map[string][]any // by method
}

type memHandle struct{ token int64 }

func (h *handing) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	g, err := h.memory.Acquire(ctx, a)
	if g.Status != backend.Held {
		g.Handle = &memHandle{token: g.Token}
	}
	return g, err
}

func (h *handing) note(method string, l backend.Lease) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[method] = append(h.seen[method], l.Handle)
}

func (h *handing) Release(ctx context.Context, l backend.Lease) (int64, error) {
	h.note("Release", l)
	return h.memory.Release(ctx, l)
}

func (h *handing) Extend(ctx context.Context, ls []backend.Lease) ([]backend.Renewal, error) {
	for _, l := range ls {
		h.note("Extend", l)
	}
	return h.memory.Extend(ctx, ls)
}

func (h *handing) TTL(ctx context.Context, l backend.Lease) (time.Duration, error) {
	h.note("TTL", l)
	return h.memory.TTL(ctx, l)
}

// The handle a backend's grant carries comes back, the same value, in
// every Lease of that lock: TTL, Extend and Release.
func TestBackendHandle(t *testing.T) {
	h := &handing{memory: newMemory(), seen: map[string][]any{}}
	l := memLocker(t, h)
	ctx := seamCtx(t)
	lk, err := l.Lock(ctx, "h", mutex.WithTTL(time.Hour), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	_, err = lk.TTL(ctx)
	require.NoError(t, err)
	require.NoError(t, lk.Extend(ctx, time.Hour))
	require.NoError(t, lk.Release(ctx))

	h.mu.Lock()
	defer h.mu.Unlock()
	for _, method := range []string{"TTL", "Extend", "Release"} {
		require.Len(t, h.seen[method], 1, method)
		got, ok := h.seen[method][0].(*memHandle)
		if assert.True(t, ok, "%s got %v", method, h.seen[method][0]) {
			assert.Equal(t, lk.Token(), got.token, method)
		}
	}
}

// handingOff is a memory that also hands a lock over in one step
// (backend.HandOffer), and counts its attempts and hand-offs.
type handingOff struct {
	*memory
	attempts, handoffs atomic.Int64
}

func (h *handingOff) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	h.attempts.Add(1)
	return h.memory.Acquire(ctx, a)
}

func (h *handingOff) HandOff(_ context.Context, from backend.Lease, next backend.Attempt) (int64, backend.Grant, error) {
	h.handoffs.Add(1)
	m := h.memory
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.holds(from)
	if k == nil {
		return -1, backend.Grant{}, nil
	}
	if k.count--; k.count > 0 {
		return k.count, backend.Grant{}, nil
	}
	m.last++
	now := time.Now()
	m.locks[next.Key] = &memLock{owner: next.Owner, token: m.last, count: 1, until: now.Add(next.TTL), since: now}
	return 0, backend.Grant{Status: backend.Acquired, Token: m.last, Handle: &memHandle{token: m.last}}, nil
}

// With a HandOffer, an Unlock hands the lock to this Locker's next waiter
// in one step: the waiter makes no attempt of its own, and its Lock carries
// the hand-off's grant (token, handle).
func TestBackendHandOff(t *testing.T) {
	h := &handingOff{memory: newMemory()}
	l := memLocker(t, h)
	ctx := seamCtx(t)
	lk, err := l.Lock(ctx, "o", mutex.WithTTL(time.Hour))
	require.NoError(t, err)
	got := make(chan *mutex.Lock, 1)
	go func() {
		w, err := l.Lock(ctx, "o", mutex.WithRetry(time.Hour, time.Hour), mutex.WithTTL(time.Hour))
		assert.NoError(t, err)
		got <- w
	}()
	// The waiter's attempts (a first one, then one queued) found it held;
	// then it parks, its poll bounded by the holder's hour.
	require.Eventually(t, func() bool { return mutexhooks.WaitersOf(l, "o") == 1 && h.attempts.Load() >= 3 },
		10*time.Second, time.Millisecond, "the waiter tried and parked")
	before := h.attempts.Load()
	require.NoError(t, lk.Release(ctx))
	w := <-got
	require.NotNil(t, w)
	assert.Equal(t, int64(1), h.handoffs.Load())
	assert.Equal(t, before, h.attempts.Load(), "handed the lock, the waiter made no attempt of its own")
	assert.Greater(t, w.Token(), lk.Token())
	owner, held := h.holder("o")
	assert.True(t, held)
	assert.NotEmpty(t, owner)
	require.NoError(t, w.Release(ctx))
	_, held = h.holder("o")
	assert.False(t, held, "the waiter's Unlock released the handed-off lock: its lease matched")
}

// lending is a memory that lends adapters a Redis client
// (redisdriver.ClientHolder).
type lending struct {
	*memory
	c redis.UniversalClient
}

func (l lending) Client() redis.UniversalClient { return l.c }

// A backend that is a redisdriver.ClientHolder lends its client
// (redisdriver.ClientOf), and httplock accepts the Locker; one that lends
// none (a nil client, typed or not), or is no ClientHolder, lends nil, and
// httplock refuses it.
func TestBackendClientHolder(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := memLocker(t, lending{newMemory(), c})
	assert.Same(t, c, redisdriver.ClientOf(l.Backend()))
	_, err := httplock.New(l)
	assert.NoError(t, err)

	for name, b := range map[string]backend.Backend{
		"nil client":       lending{newMemory(), nil},
		"typed nil client": lending{newMemory(), (*redis.Client)(nil)},
		"no ClientHolder":  newMemory(),
	} {
		t.Run(name, func(t *testing.T) {
			l := memLocker(t, b)
			assert.Nil(t, redisdriver.ClientOf(l.Backend()))
			_, err := httplock.New(l)
			assert.ErrorIs(t, err, httplock.ErrInvalid)
		})
	}
}
