package mutex_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
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
func TestSeamHandle(t *testing.T) {
	h := &handing{memory: newMemory(), seen: map[string][]any{}}
	l := memLocker(t, h)
	ctx := seamCtx(t)
	lk, err := l.Lock(ctx, "h", mutex.WithTTL(time.Hour), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	_, err = lk.TTL(ctx)
	require.NoError(t, err)
	require.NoError(t, lk.Extend(ctx, time.Hour))
	require.NoError(t, lk.Unlock(ctx))

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
