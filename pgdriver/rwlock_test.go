package pgdriver_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// TestRWLockRules: the rules of backend.RWLocker, one statement at a time:
// readers share, a queued writer's mark keeps new readers out, the write
// excludes everyone and its token rises, a read's token is the last
// write's, a try without queueing leaves no mark, a clean-up release takes
// the mark out, downgrade is one step (and a retry of it succeeds), and an
// expired writer's key is taken while its renewal and release find it
// gone.
func TestRWLockRules(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	d := driverOf(t, pool, schema)
	const lease = time.Minute
	try := func(owner string, write, queue bool) backend.Grant {
		t.Helper()
		g, err := d.AcquireRW(ctx, backend.RWAttempt{Key: "rw", Owner: owner, TTL: lease, Write: write, Queue: queue})
		require.NoError(t, err)
		return g
	}
	release := func(owner string, token int64) bool {
		t.Helper()
		ok, err := d.ReleaseRW(ctx, backend.Lease{Key: "rw", Owner: owner, Token: token})
		require.NoError(t, err)
		return ok
	}
	state := func() backend.RWState {
		t.Helper()
		st, err := d.InspectRW(ctx, "rw")
		require.NoError(t, err)
		return st
	}

	r1, r2 := try("r1", false, true), try("r2", false, true)
	require.Equal(t, backend.Acquired, r1.Status)
	require.Equal(t, backend.Acquired, r2.Status)
	assert.Zero(t, r1.Token, "a read before any write")
	assert.Equal(t, backend.Held, try("w0", true, false).Status)
	assert.Zero(t, state().Waiting, "a try leaves no mark")
	w := try("w1", true, true)
	require.Equal(t, backend.Held, w.Status)
	assert.LessOrEqual(t, w.Remaining, lease/3, "a waiting writer comes back before its mark runs out")
	assert.Equal(t, 1, state().Waiting)
	assert.Equal(t, backend.Held, try("r3", false, true).Status, "a new reader behind a waiting writer")
	assert.Equal(t, r1, try("r1", false, true), "a reader's retry is the same grant")
	require.True(t, release("r1", r1.Token))
	require.False(t, release("r1", r1.Token), "a second release")
	assert.Equal(t, backend.Held, try("w1", true, true).Status, "a reader still holds")
	require.True(t, release("r2", r2.Token))
	w = try("w1", true, true)
	require.Equal(t, backend.Acquired, w.Status)
	assert.Positive(t, w.Token)
	st := state()
	require.NotNil(t, st.Writer)
	assert.Equal(t, "w1", st.Writer.Owner)
	assert.Equal(t, w.Token, st.LastWrite)
	assert.Zero(t, st.Waiting, "the writer's mark is gone with its grant")
	assert.Empty(t, st.Readers)
	assert.Equal(t, backend.Held, try("r3", false, true).Status)
	assert.Equal(t, backend.Held, try("w2", true, true).Status)
	assert.False(t, release("w2", 0), "a waiting writer holds nothing")
	assert.Zero(t, state().Waiting, "its clean-up takes its mark out")

	rs, err := d.ExtendRW(ctx, []backend.Lease{
		{Key: "rw", Owner: "w1", Token: w.Token + 1, TTL: lease},
		{Key: "rw", Owner: "w1", Token: w.Token, TTL: lease},
	})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Gone, backend.Renewed}, rs)
	down := backend.Lease{Key: "rw", Owner: "w1", Token: w.Token, TTL: lease}
	for range 2 {
		ok, err := d.DowngradeRW(ctx, down)
		require.NoError(t, err)
		assert.True(t, ok, "a downgrade and its retry")
	}
	st = state()
	assert.Nil(t, st.Writer)
	require.Len(t, st.Readers, 1)
	assert.Equal(t, backend.RWHolder{Owner: "w1", Token: w.Token, Left: st.Readers[0].Left}, st.Readers[0])
	r3 := try("r3", false, true)
	require.Equal(t, backend.Acquired, r3.Status)
	assert.Equal(t, w.Token, r3.Token, "a read's token is the last write's")
	ok, err := d.DowngradeRW(ctx, backend.Lease{Key: "rw", Owner: "r3", Token: w.Token + 1, TTL: lease})
	require.NoError(t, err)
	assert.False(t, ok, "a reader with another token")
	require.True(t, release("w1", w.Token))
	require.True(t, release("r3", 0))

	// A writer that stopped: the key is taken once its lease ran out.
	const short = 300 * time.Millisecond
	g, err := d.AcquireRW(ctx, backend.RWAttempt{Key: "rw", Owner: "x", TTL: short, Write: true})
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, g.Status)
	assert.Greater(t, g.Token, w.Token)
	require.Eventually(t, func() bool { return try("y", false, false).Status == backend.Acquired }, 20*time.Second, 10*time.Millisecond)
	rs, err = d.ExtendRW(ctx, []backend.Lease{{Key: "rw", Owner: "x", Token: g.Token, TTL: lease}})
	require.NoError(t, err)
	assert.Equal(t, []backend.Renewal{backend.Gone}, rs)
	assert.False(t, release("x", g.Token), "the stopped writer's late release")
	assert.Equal(t, g.Token, state().LastWrite)
}

// TestRWMutexAcrossLockers: readers and writers of three Lockers, each its
// own pool and listening session: a writer is never beside anyone, readers
// do share, every write's token is above the one before, and waiters are
// woken by the others' releases (they poll no sooner than a minute).
func TestRWMutexAcrossLockers(t *testing.T) {
	_, schema := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	url := testutil.PostgresURL(t)
	var rws []*mutex.RWMutex
	for p := range 3 {
		// Polls no sooner than its lease: a waiter that is not woken
		// misses the test's deadline.
		rw, err := mutex.NewRWMutex(listeningLocker(t, url, schema, fmt.Sprintf("rw-%d", p)), "doc",
			mutex.WithTTL(time.Minute), mutex.WithRetry(time.Minute, time.Minute))
		require.NoError(t, err)
		rws = append(rws, rw)
	}
	var mu sync.Mutex
	readers, writers, shared := 0, 0, false
	var writes []int64
	enter := func(write bool, token int64) {
		mu.Lock()
		defer mu.Unlock()
		if write {
			assert.Zero(t, readers+writers, "a writer beside another hold")
			writers++
			writes = append(writes, token)
			return
		}
		assert.Zero(t, writers, "a reader beside the writer")
		readers++
		shared = shared || readers > 1
	}
	leave := func(write bool) {
		mu.Lock()
		defer mu.Unlock()
		if write {
			writers--
		} else {
			readers--
		}
	}
	// Two readers hold together first, so that sharing is seen whatever
	// the schedule.
	h1, err := rws[0].RLock(ctx)
	require.NoError(t, err)
	enter(false, h1.Token())
	h2, err := rws[1].RLock(ctx)
	require.NoError(t, err)
	enter(false, h2.Token())
	for _, h := range []*mutex.RWHold{h1, h2} {
		leave(false)
		require.NoError(t, h.Release(ctx))
	}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			rw, write := rws[i%3], i%2 == 0
			for range 4 {
				var h *mutex.RWHold
				var err error
				if write {
					h, err = rw.Lock(ctx)
				} else {
					h, err = rw.RLock(ctx)
				}
				if !assert.NoError(t, err) {
					return
				}
				enter(write, h.Token())
				leave(write)
				assert.NoError(t, h.Release(ctx))
			}
		})
	}
	wg.Wait()
	assert.True(t, shared, "two readers held at once")
	require.Len(t, writes, 12)
	for i := 1; i < len(writes); i++ {
		assert.Greater(t, writes[i], writes[i-1], "write %d", i)
	}
}
