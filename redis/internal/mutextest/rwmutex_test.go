package mutextest

import (
	"context"
	"errors"
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
)

func rwMutex(t *testing.T, l *mutex.Locker, name string, opts ...mutex.LockOption) *mutex.RWMutex {
	t.Helper()
	rw, err := mutex.NewRWMutex(l, name, opts...)
	require.NoError(t, err)
	return rw
}

// rwWitness counts the holds whose context is live, as their holders see
// them: a holder enters when granted and leaves before it unlocks or when
// its hold's context ends, whichever comes first.
type rwWitness struct {
	mu               sync.Mutex
	readers, writers int
	mostReaders      int
	broken           []string
}

func (w *rwWitness) enter(h *mutex.RWHold) (leave func()) {
	w.mu.Lock()
	switch {
	case h.Write() && (w.writers > 0 || w.readers > 0):
		w.broken = append(w.broken, "a writer entered beside others")
	case !h.Write() && w.writers > 0:
		w.broken = append(w.broken, "a reader entered beside a writer")
	}
	if h.Write() {
		w.writers++
	} else {
		w.readers++
		w.mostReaders = max(w.mostReaders, w.readers)
	}
	w.mu.Unlock()
	write := h.Write()
	var once sync.Once
	leave = func() {
		once.Do(func() {
			w.mu.Lock()
			if write {
				w.writers--
			} else {
				w.readers--
			}
			w.mu.Unlock()
		})
	}
	context.AfterFunc(h.Context(), leave)
	return leave
}

// Readers and writers of two Lockers loop on one lock: a writer never
// holds beside anyone, a reader never beside a writer, write tokens rise,
// and every reader's token is a write's that was granted before it.
func TestRWMutexReadersOverlapWritersExclude(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		ls := []*mutex.Locker{newLocker(t, c), newLocker(t, c)}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		w := &rwWitness{}
		var mu sync.Mutex
		var lastWrite int64
		var wg sync.WaitGroup
		for g := range 8 {
			rw := rwMutex(t, ls[g%2], "ledger")
			write := g%4 == 0
			wg.Go(func() {
				for range 30 {
					take := rw.RLock
					if write {
						take = rw.Lock
					}
					h, err := take(ctx)
					if !assert.NoError(t, err) {
						return
					}
					leave := w.enter(h)
					mu.Lock()
					if write {
						assert.Greater(t, h.Token(), lastWrite, "write tokens must rise")
						lastWrite = h.Token()
					} else {
						assert.LessOrEqual(t, h.Token(), lastWrite, "a reader's token is a granted write's")
					}
					mu.Unlock()
					time.Sleep(time.Millisecond) // the work under the hold
					leave()
					assert.NoError(t, h.Release(ctx))
				}
			})
		}
		wg.Wait()
		assert.Empty(t, w.broken)
	})
}

// The test above proves exclusion; this one that readers do share: a
// reader of another Locker is let in while the first holds, and a writer
// is not.
func TestRWMutexReadersShare(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b := rwMutex(t, newLocker(t, c), "share"), rwMutex(t, newLocker(t, c), "share")
		ctx := context.Background()
		r1, err := a.RLock(ctx)
		require.NoError(t, err)
		r2, err := b.TryRLock(ctx)
		require.NoError(t, err, "a second reader must share")
		_, err = b.TryLock(ctx)
		require.ErrorIs(t, err, mutex.ErrNotAcquired)
		require.NoError(t, r1.Release(ctx))
		_, err = b.TryLock(ctx)
		require.ErrorIs(t, err, mutex.ErrNotAcquired, "one reader still holds")
		require.NoError(t, r2.Release(ctx))
		wr, err := b.TryLock(ctx)
		require.NoError(t, err)
		_, err = a.TryRLock(ctx)
		require.ErrorIs(t, err, mutex.ErrNotAcquired, "a reader beside the writer")
		require.NoError(t, wr.Release(ctx))
	})
}

// Readers of one Locker keep coming, always one holding, while a writer of
// another waits: from the moment its mark is seen, no reader that asks is
// let in before the writer, and the writer is granted within one reader
// lease of its mark (the readers it found hold briefly).
func TestRWMutexWriterNotStarvedByReaders(t *testing.T) {
	c, _ := redistest.Redis(t)
	const readerTTL = 2 * time.Second
	readers := rwMutex(t, newLocker(t, c), "stream", mutex.WithTTL(readerTTL))
	writer := rwMutex(t, newLocker(t, c), "stream")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var marked, written, stop atomic.Bool
	var lateReads, reads atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for !stop.Load() {
				afterMark := marked.Load()
				h, err := readers.RLock(ctx)
				if !assert.NoError(t, err) {
					return
				}
				reads.Add(1)
				if afterMark && !written.Load() {
					lateReads.Add(1)
				}
				time.Sleep(10 * time.Millisecond) // the work under the hold
				assert.NoError(t, h.Release(ctx))
			}
		})
	}
	require.Eventually(t, func() bool { return reads.Load() >= 8 }, 10*time.Second, time.Millisecond, "the stream of readers never flowed")
	late := testutil.MeasureLateness(t)
	got := make(chan *mutex.RWHold, 1)
	go func() {
		h, err := writer.Lock(ctx)
		assert.NoError(t, err)
		written.Store(true)
		got <- h
	}()
	var at time.Time
	for !marked.Load() {
		st, err := writer.State(ctx)
		require.NoError(t, err)
		if st.Waiting > 0 || st.Writer != nil {
			at = time.Now()
			marked.Store(true)
		}
	}
	h := <-got
	waited := time.Since(at)
	require.NotNil(t, h)
	stop.Store(true)
	require.NoError(t, h.Release(ctx))
	wg.Wait()
	assert.Zero(t, lateReads.Load(), "readers were let in while the writer waited")
	assert.Less(t, waited, late.Bound(readerTTL), "the writer waited past one reader lease")
}

// A read cannot become a write: Lock through a read hold's context returns
// ErrUpgrade at once, and asks nothing of the backend (no waiting mark);
// nested holds are refused likewise.
func TestRWMutexUpgradeRefusedAtOnce(t *testing.T) {
	c, _ := redistest.Redis(t)
	rw := rwMutex(t, newLocker(t, c), "up")
	r, err := rw.RLock(context.Background())
	require.NoError(t, err)
	// A wait would end with ErrNotAcquired at the deadline.
	ctx, cancel := r.Join(context.Background())
	ctx, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	_, err = rw.Lock(ctx)
	cancel2()
	cancel()
	require.ErrorIs(t, err, mutex.ErrUpgrade)
	_, err = rw.TryLock(r.Context())
	require.ErrorIs(t, err, mutex.ErrUpgrade)
	_, err = rw.RLock(r.Context())
	require.ErrorIs(t, err, mutex.ErrInvalid)
	st, err := rw.State(context.Background())
	require.NoError(t, err)
	assert.Zero(t, st.Waiting, "the refused upgrade left a mark")
	assert.Len(t, st.Readers, 1)
	require.NoError(t, r.Release(context.Background()))

	w, err := rw.Lock(context.Background())
	require.NoError(t, err)
	_, err = rw.Lock(w.Context())
	require.ErrorIs(t, err, mutex.ErrInvalid)
	require.False(t, errors.Is(err, mutex.ErrUpgrade))
	require.NoError(t, w.Release(context.Background()))
}

// Downgrade keeps the write's token and lets other readers in, not
// writers; the next write's token is greater.
func TestRWMutexDowngrade(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b := rwMutex(t, newLocker(t, c), "down"), rwMutex(t, newLocker(t, c), "down")
		ctx := context.Background()
		first, err := b.RLock(ctx)
		require.NoError(t, err)
		assert.Zero(t, first.Token(), "no write was granted yet")
		require.NoError(t, first.Release(ctx))

		w, err := a.Lock(ctx)
		require.NoError(t, err)
		require.True(t, w.Write())
		require.NoError(t, w.Downgrade(ctx))
		assert.False(t, w.Write())
		require.ErrorIs(t, w.Downgrade(ctx), mutex.ErrInvalid)
		r, err := b.TryRLock(ctx)
		require.NoError(t, err, "a reader beside the downgraded one")
		assert.Equal(t, w.Token(), r.Token(), "a reader reads after the last write")
		_, err = b.TryLock(ctx)
		require.ErrorIs(t, err, mutex.ErrNotAcquired)
		require.NoError(t, w.Release(ctx))
		require.NoError(t, r.Release(ctx))
		w2, err := b.TryLock(ctx)
		require.NoError(t, err)
		assert.Greater(t, w2.Token(), w.Token())
		require.NoError(t, w2.Release(ctx))
	})
}
