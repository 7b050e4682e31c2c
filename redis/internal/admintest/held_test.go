package admintest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// heldOf is the entry of key in a's Held, and whether there is one.
func heldOf(a *admin.Admin, key string) (admin.HeldLock, bool) {
	for _, h := range a.Held() {
		if h.Key == key {
			return h, true
		}
	}
	return admin.HeldLock{}, false
}

// Held lists the Locker's own locks with what a debug page shows.
func TestHeld(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c)
	a := adminOf(t, l)
	assert.Empty(t, a.Held())
	before := time.Now()
	ka, err := l.Lock(ctx, "b-key", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	kb, err := l.Lock(ctx, "a-key", mutex.WithTTL(time.Minute), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	_, err = l.Lock(ka.Context(), "b-key") // re-entered
	require.NoError(t, err)
	require.NoError(t, ka.Extend(ctx, time.Minute))
	got := make(chan error, 1)
	go func() {
		lk, err := l.Lock(ctx, "a-key")
		if err == nil {
			err = lk.Release(ctx)
		}
		got <- err
	}()
	waitFor(t, ctx, "the local waiter never queued", func() bool {
		h, ok := heldOf(a, "a-key")
		return ok && h.Waiters == 1
	})

	held := a.Held()
	require.Len(t, held, 2)
	assert.Equal(t, "a-key", held[0].Key)
	assert.Equal(t, kb.Token(), held[0].Token)
	assert.False(t, held[0].AutoRenew)
	assert.Equal(t, 1, held[0].Waiters)
	assert.Equal(t, 1, held[0].Count)
	assert.False(t, held[0].Permit)
	assert.Empty(t, held[0].RW)
	assert.Equal(t, "b-key", held[1].Key)
	assert.Equal(t, ka.Token(), held[1].Token)
	assert.True(t, held[1].AutoRenew)
	assert.Equal(t, 2, held[1].Count)
	assert.Equal(t, 1, held[1].Renewals)
	assert.Greater(t, held[1].LastRenewal, time.Duration(0))
	assert.Greater(t, held[1].Lease, 50*time.Second)
	assert.Equal(t, time.Minute, held[1].TTL)
	assert.GreaterOrEqual(t, held[1].HeldFor, time.Duration(0))
	assert.False(t, held[1].Acquired.Before(before.Add(-time.Second)), "by this process's clock")

	require.NoError(t, kb.Release(ctx))
	select {
	case err := <-got:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatal("the waiter never got the lock")
	}
	require.NoError(t, ka.Release(ctx))
	require.NoError(t, ka.Release(ctx))
	assert.Empty(t, a.Held())
}

// Held shows a semaphore's permits and a read-write lock's holds for what
// they are, each counted once; it needs no Inspector: it reads the Locker,
// not the backend.
func TestHeldPermitsAndHolds(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c)
	a := adminOf(t, l)
	s, err := mutex.NewSemaphore(l, "exports", 2)
	require.NoError(t, err)
	p, err := s.Acquire(ctx)
	require.NoError(t, err)
	rw, err := mutex.NewRWMutex(l, "prices")
	require.NoError(t, err)
	r, err := rw.RLock(ctx)
	require.NoError(t, err)

	h, ok := heldOf(a, "exports")
	require.True(t, ok, "%+v", a.Held())
	assert.True(t, h.Permit)
	assert.Empty(t, h.RW)
	assert.Equal(t, 1, h.Count)
	assert.Equal(t, p.Token(), h.Token)
	h, ok = heldOf(a, "prices")
	require.True(t, ok, "%+v", a.Held())
	assert.False(t, h.Permit)
	assert.Equal(t, "read", h.RW)
	assert.Equal(t, 1, h.Count)
	require.NoError(t, r.Release(ctx))
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	h, ok = heldOf(a, "prices")
	require.True(t, ok)
	assert.Equal(t, "write", h.RW)
	assert.Equal(t, w.Token(), h.Token)
	require.NoError(t, w.Release(ctx))
	require.NoError(t, p.Release(ctx))
	assert.Empty(t, a.Held())

	m := plain{newMemory()}
	ml := testutil.WithBackend(t, m)
	lk, err := ml.Lock(ctx, "k")
	require.NoError(t, err)
	held := adminOf(t, ml).Held()
	require.Len(t, held, 1, "a backend without inspection: Held works")
	assert.Equal(t, lk.Token(), held[0].Token)
	require.NoError(t, lk.Release(ctx))
}
