package mutextest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/mutexhooks"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisfence"
)

// A reader process killed (SIGKILL, no unlock, no Close) holds the lock no
// longer than its lease: a writer of another process waiting for it is
// granted then.
func TestRWMutexDeadReaderEndsWithinLease(t *testing.T) {
	const env, ttl = "REDFENCE_RW_CHILD", 500 * time.Millisecond
	if addr := os.Getenv(env); addr != "" {
		readUntilKilled(t, addr, ttl)
		return
	}
	c, srv := redistest.Redis(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestRWMutexDeadReaderEndsWithinLease$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+srv.Addr())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	held := false
	for sc := bufio.NewScanner(out); !held && sc.Scan(); {
		held = strings.HasPrefix(sc.Text(), "READING")
	}
	require.True(t, held, "the child never said it reads")

	rw := rwMutex(t, newLocker(t, c), "killed")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = rw.TryLock(ctx)
	require.ErrorIs(t, err, mutex.ErrNotAcquired, "the child reads")
	late := testutil.MeasureLateness(t)
	killed := time.Now()
	require.NoError(t, cmd.Process.Kill())
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	assert.Less(t, time.Since(killed), late.Bound(ttl+20*time.Millisecond), "the dead reader held past its lease")
	require.NoError(t, w.Release(ctx))
}

// readUntilKilled is the child's side: read, renewed, say so, and wait to
// be killed.
func readUntilKilled(t *testing.T, addr string, ttl time.Duration) {
	l := mustLocker(t, redis.NewClient(&redis.Options{Addr: addr}))
	rw, err := mutex.NewRWMutex(l, "killed", mutex.WithTTL(ttl))
	require.NoError(t, err)
	h, err := rw.RLock(context.Background())
	require.NoError(t, err)
	os.Stdout.WriteString("READING " + strconv.FormatInt(h.Token(), 10) + "\n")
	<-h.Context().Done() // only the kill ends the child
	t.Fatal("the child's read ended before it was killed")
}

// A writer that gives up takes its mark out: readers are let in at once,
// not one lease (here a minute) later. A TryLock leaves no mark at all.
func TestRWMutexWriterGivingUpLeavesNoMark(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	readers, writer := rwMutex(t, a, "gave-up"), rwMutex(t, b, "gave-up", mutex.WithTTL(time.Minute))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a test that breaks fails, never hangs
	defer cancel()
	r, err := readers.RLock(ctx)
	require.NoError(t, err)
	_, err = writer.TryLock(ctx)
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	r2, err := readers.TryRLock(ctx)
	require.NoError(t, err, "TryLock left a mark")
	require.NoError(t, r2.Release(ctx))

	wctx, wcancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { _, err := writer.Lock(wctx); got <- err }()
	require.Eventually(t, func() bool { return mutexhooks.RWSubscribed(b, "gave-up") }, 5*time.Second, time.Millisecond)
	_, err = readers.TryRLock(ctx)
	require.ErrorIs(t, err, mutex.ErrNotAcquired, "the waiting writer's mark keeps readers out")
	wcancel()
	require.ErrorIs(t, <-got, mutex.ErrNotAcquired)
	r2, err = readers.RLock(ctx) // the mark's lease is a minute; ctx is half that
	require.NoError(t, err)
	require.NoError(t, r2.Release(ctx))
	require.NoError(t, r.Release(ctx))
}

// A writer that stalled past its lease writes through a fence after the
// write was granted again and used: the write is refused.
func TestRWMutexStalledWriterFencedOut(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := redisfence.New(c)
	require.NoError(t, err)
	write := func(token int64, v string) error {
		return f.Do(ctx, "book", token, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			pipe.Set(ctx, redisfence.Tag("book")+"last", v, 0)
			return nil
		})
	}
	stalled, err := rwMutex(t, newLocker(t, c), "book", mutex.WithTTL(150*time.Millisecond), mutex.WithAutoRenew(false)).Lock(ctx)
	require.NoError(t, err)
	<-stalled.Context().Done() // a paused process would not see this; its fence does

	w, err := rwMutex(t, newLocker(t, c), "book").Lock(ctx)
	require.NoError(t, err)
	require.Greater(t, w.Token(), stalled.Token())
	require.NoError(t, write(w.Token(), "new"))
	assert.ErrorIs(t, write(stalled.Token(), "stale"), redisfence.ErrStaleToken)
	assert.Equal(t, "new", c.Get(ctx, redisfence.Tag("book")+"last").Val())
	require.NoError(t, w.Release(ctx))
}

// Read-write locks need a backend that keeps them: Redlock refuses at once;
// bad input is refused before anything is sent.
func TestRWMutexRefusals(t *testing.T) {
	clients, _ := redlockNodes(t, 3)
	_, err := mutex.NewRWMutex(newRedlock(t, clients), "x")
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.NotErrorIs(t, err, mutex.ErrInvalid)

	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	var nilCtx context.Context // a variable: staticcheck refuses a literal nil
	var nilRW *mutex.RWMutex
	for name, fn := range map[string]func() error{
		"empty name":  func() error { _, err := mutex.NewRWMutex(l, ""); return err },
		"owner":       func() error { _, err := mutex.NewRWMutex(l, "x", mutex.WithOwner("me")); return err },
		"replica ack": func() error { _, err := mutex.NewRWMutex(l, "x", mutex.WithReplicaAck(1, time.Second)); return err },
		"bad ttl":     func() error { _, err := mutex.NewRWMutex(l, "x", mutex.WithTTL(-1)); return err },
		"nil ctx":     func() error { _, err := rwMutex(t, l, "x").RLock(nilCtx); return err },
		"nil ctx w":   func() error { _, err := rwMutex(t, l, "x").Lock(nilCtx); return err },
		"nil state":   func() error { _, err := rwMutex(t, l, "x").State(nilCtx); return err },
		"nil rw":      func() error { _, err := nilRW.RLock(context.Background()); return err },
	} {
		assert.ErrorIs(t, fn(), mutex.ErrInvalid, name)
	}
	assert.Zero(t, evalCalls(c.Info(context.Background(), "commandstats").Val()), "bad input reached the server")
	var nilHold *mutex.RWHold
	assert.ErrorIs(t, nilHold.Release(context.Background()), mutex.ErrNotHeld)
	assert.ErrorIs(t, nilHold.Downgrade(context.Background()), mutex.ErrNotHeld)
}

// Close releases the holds (their contexts end with ErrReleased, the
// backend holds none), makes a waiting writer return ErrClosed and takes
// its mark out; Held shows what is held and how, until then.
func TestRWMutexCloseAndHeld(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := mustLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rw := rwMutex(t, l, "close")
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	held := adminOf(t, l).Held()
	require.Len(t, held, 1)
	assert.Equal(t, "read", held[0].RW)
	assert.False(t, held[0].Permit)
	got := make(chan error, 1)
	go func() { _, err := rw.Lock(ctx); got <- err }()
	require.Eventually(t, func() bool { return mutexhooks.RWSubscribed(l, "close") }, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Close())
	assert.ErrorIs(t, <-got, mutex.ErrClosed)
	assert.ErrorIs(t, context.Cause(r.Context()), mutex.ErrReleased)
	_, err = rw.RLock(ctx)
	assert.ErrorIs(t, err, mutex.ErrClosed)

	ol := newLocker(t, c)
	w, err := rwMutex(t, ol, "close").TryLock(ctx)
	require.NoError(t, err, "Close left a hold")
	held = adminOf(t, ol).Held()
	require.Len(t, held, 1)
	assert.Equal(t, "write", held[0].RW)
	require.NoError(t, w.Release(ctx))
}

// Close makes a waiting writer return ErrClosed; once both returned, its
// mark is out, so that readers of other Lockers are let
// in at once rather than one lease (a minute) later.
func TestRWCloseTakesWaitingWriterMarkOut(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	readers := rwMutex(t, newLocker(t, c), "close-mark")
	r, err := readers.RLock(ctx)
	require.NoError(t, err)
	l := mustLocker(t, c)
	writer := rwMutex(t, l, "close-mark", mutex.WithTTL(time.Minute))
	got := make(chan error, 1)
	go func() { _, err := writer.Lock(ctx); got <- err }()
	require.Eventually(t, func() bool {
		st, err := readers.State(ctx)
		return err == nil && st.Waiting == 1
	}, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Close())
	require.ErrorIs(t, <-got, mutex.ErrClosed)
	r2, err := readers.TryRLock(ctx)
	require.NoError(t, err, "Close left the waiting writer's mark")
	require.NoError(t, r2.Release(ctx))
	require.NoError(t, r.Release(ctx))
}

// Over Sentinel the semaphore and the read-write lock behave as over a
// standalone server (the same driver, through a failover client): a
// second reader shares, a writer waits for both, a second permit of one is
// refused.
func TestRWMutexAndSemaphoreOverSentinel(t *testing.T) {
	c := redistest.Sentinel(t).Client()
	t.Cleanup(func() { _ = c.Close() })
	a, b := newLocker(t, c), newLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r1, err := rwMutex(t, a, "s").RLock(ctx)
	require.NoError(t, err)
	r2, err := rwMutex(t, b, "s").TryRLock(ctx)
	require.NoError(t, err)
	_, err = rwMutex(t, b, "s").TryLock(ctx)
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	require.NoError(t, r1.Release(ctx))
	require.NoError(t, r2.Release(ctx))
	w, err := rwMutex(t, b, "s").TryLock(ctx)
	require.NoError(t, err)
	require.NoError(t, w.Release(ctx))

	p, err := semaphore(t, a, "s", 1).Acquire(ctx)
	require.NoError(t, err)
	_, err = semaphore(t, b, "s", 1).TryAcquire(ctx)
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	require.NoError(t, p.Release(ctx))
}

// A zero RWHold or Permit (not from a Locker) answers as a released one,
// never panics.
func TestZeroHoldsAreNotHeld(t *testing.T) {
	ctx := context.Background()
	var h mutex.RWHold
	assert.Zero(t, h.Token())
	assert.False(t, h.Write())
	assert.Empty(t, h.Key())
	assert.Error(t, h.Context().Err())
	assert.ErrorIs(t, h.Release(ctx), mutex.ErrNotHeld)
	assert.ErrorIs(t, h.Downgrade(ctx), mutex.ErrNotHeld)
	var p mutex.Permit
	assert.Zero(t, p.Token())
	assert.Error(t, p.Context().Err())
	assert.ErrorIs(t, p.Release(ctx), mutex.ErrNotHeld)
}
