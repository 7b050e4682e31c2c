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

// A holder process killed (SIGKILL, no release, no Close) gives its permit
// back within one lease: the waiter of another process is granted it
// then, with a greater token.
func TestSemaphoreKilledHolderRegrantedWithinLease(t *testing.T) {
	const env, ttl = "REDFENCE_SEM_CHILD", 500 * time.Millisecond
	if addr := os.Getenv(env); addr != "" {
		holdUntilKilled(t, addr, ttl)
		return
	}
	c, srv := redistest.Redis(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestSemaphoreKilledHolderRegrantedWithinLease$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), env+"="+srv.Addr())
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	var childToken int64
	for sc := bufio.NewScanner(out); childToken == 0 && sc.Scan(); {
		if v, ok := strings.CutPrefix(sc.Text(), "TOKEN "); ok {
			childToken, err = strconv.ParseInt(v, 10, 64)
			require.NoError(t, err)
		}
	}
	require.NotZero(t, childToken, "the child printed no token")

	l := newLocker(t, c)
	s := semaphore(t, l, "killed", 1)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = s.TryAcquire(ctx)
	require.ErrorIs(t, err, mutex.ErrNotAcquired, "the child holds the one permit")
	late := testutil.MeasureLateness(t)
	killed := time.Now()
	require.NoError(t, cmd.Process.Kill())
	p, err := s.Acquire(ctx)
	require.NoError(t, err)
	assert.Less(t, time.Since(killed), late.Bound(ttl+20*time.Millisecond), "granted again later than one lease")
	assert.Greater(t, p.Token(), childToken)
	require.NoError(t, p.Release(ctx))
}

// holdUntilKilled is the child's side: take the one permit, renewed, say
// its token, and wait to be killed.
func holdUntilKilled(t *testing.T, addr string, ttl time.Duration) {
	c := redis.NewClient(&redis.Options{Addr: addr})
	l := mustLocker(t, c)
	s, err := mutex.NewSemaphore(l, "killed", 1, mutex.WithTTL(ttl))
	require.NoError(t, err)
	p, err := s.Acquire(context.Background())
	require.NoError(t, err)
	os.Stdout.WriteString("TOKEN " + strconv.FormatInt(p.Token(), 10) + "\n")
	<-p.Context().Done() // only the kill ends the child
	t.Fatal("the child's permit ended before it was killed")
}

// A holder that stalled past its lease writes through a fence after its
// permit was granted again and used: the write is refused.
func TestSemaphoreStalledHolderFencedOut(t *testing.T) {
	c, _ := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a test that breaks fails, never hangs
	defer cancel()
	f, err := redisfence.New(c)
	require.NoError(t, err)
	write := func(token int64, v string) error {
		return f.Do(ctx, "exports", token, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			pipe.Set(ctx, redisfence.Tag("exports")+"last", v, 0)
			return nil
		})
	}
	stalled, err := semaphore(t, a, "exports", 1, mutex.WithTTL(150*time.Millisecond), mutex.WithAutoRenew(false)).Acquire(ctx)
	require.NoError(t, err)
	<-stalled.Context().Done() // a paused process would not see this; its fence does

	p, err := semaphore(t, b, "exports", 1).Acquire(ctx)
	require.NoError(t, err)
	require.Greater(t, p.Token(), stalled.Token())
	require.NoError(t, write(p.Token(), "new"))
	err = write(stalled.Token(), "stale")
	assert.ErrorIs(t, err, redisfence.ErrStaleToken)
	assert.Equal(t, "new", c.Get(ctx, redisfence.Tag("exports")+"last").Val())
	require.NoError(t, p.Release(ctx))
}

// Waiters of one Locker queue: a release wakes the head alone, which takes
// the permit, and the next head asks once and waits. A herd would make
// every waiter ask at every release.
func TestSemaphoreWaitersMakeNoHerd(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// No poll: the holders' leases (10s) bound it, and the test ends first.
	s := semaphore(t, l, "herd", 1, mutex.WithRetry(time.Minute, time.Minute))
	first, err := s.Acquire(ctx)
	require.NoError(t, err)
	before := evalCalls(c.Info(ctx, "commandstats").Val())
	const waiters = 8
	got := make(chan *mutex.Permit, waiters)
	for range waiters {
		go func() {
			p, err := s.Acquire(ctx)
			assert.NoError(t, err)
			got <- p
		}()
	}
	calls := func() int { return evalCalls(c.Info(ctx, "commandstats").Val()) - before }
	require.Eventually(t, func() bool {
		return mutexhooks.SemaphoreWaiters(l, "herd") == waiters && mutexhooks.SemaphoreSubscribed(l, "herd") && calls() >= 2
	}, 5*time.Second, time.Millisecond)
	// Only the head asked: once, and once more when subscribed.
	assert.Equal(t, 2, calls(), "script calls of %d queued waiters", waiters)
	require.NoError(t, first.Release(ctx))
	for range waiters {
		select {
		case p := <-got:
			require.NotNil(t, p)
			require.NoError(t, p.Release(ctx))
		case <-ctx.Done():
			t.Fatal("a waiter was not woken")
		}
	}
	// The first head's two; first's release; then per waiter its grant
	// and release, the next head's one attempt, which finds the permit held
	// unless it came after the release, and at most one more when a
	// release's notification reaches a head that took its turn already. A
	// herd would cost an attempt per waiter per release.
	assert.LessOrEqual(t, calls(), 2+1+4*waiters, "script calls for %d waiters", waiters)
}

// A release in one process wakes the waiter of another through the
// backend's notification, long before its poll.
func TestSemaphoreReleaseWakesOtherLocker(t *testing.T) {
	eachBackend(t, func(t *testing.T, c redis.UniversalClient) {
		a, b := newLocker(t, c), newLocker(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		p, err := semaphore(t, a, "wake", 1).Acquire(ctx)
		require.NoError(t, err)
		got := make(chan error, 1)
		go func() {
			q, err := semaphore(t, b, "wake", 1, mutex.WithRetry(time.Minute, time.Minute)).Acquire(ctx)
			if err == nil {
				err = q.Release(ctx)
			}
			got <- err
		}()
		// p's lease is 10s: the waiter's poll comes after it, not before.
		require.Eventually(t, func() bool { return mutexhooks.SemaphoreSubscribed(b, "wake") }, 5*time.Second, time.Millisecond)
		released := time.Now()
		require.NoError(t, p.Release(ctx))
		require.NoError(t, <-got)
		assert.Less(t, time.Since(released), 5*time.Second)
	})
}

// Semaphores need a backend that keeps them: Redlock refuses at once, and
// bad input is refused before anything is sent.
func TestSemaphoreRefusals(t *testing.T) {
	clients, _ := redlockNodes(t, 3)
	_, err := mutex.NewSemaphore(newRedlock(t, clients), "x", 2)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.NotErrorIs(t, err, mutex.ErrInvalid)

	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	var nilCtx context.Context // a variable: staticcheck refuses a literal nil
	for name, fn := range map[string]func() error{
		"zero limit": func() error { _, err := mutex.NewSemaphore(l, "x", 0); return err },
		"huge limit": func() error { _, err := mutex.NewSemaphore(l, "x", mutex.MaxLimit+1); return err },
		"empty name": func() error { _, err := mutex.NewSemaphore(l, "", 1); return err },
		"owner":      func() error { _, err := mutex.NewSemaphore(l, "x", 1, mutex.WithOwner("me")); return err },
		"replica ack": func() error {
			_, err := mutex.NewSemaphore(l, "x", 1, mutex.WithReplicaAck(1, time.Second))
			return err
		},
		"bad ttl":      func() error { _, err := mutex.NewSemaphore(l, "x", 1, mutex.WithTTL(-1)); return err },
		"nil ctx":      func() error { _, err := semaphore(t, l, "x", 1).Acquire(nilCtx); return err },
		"set limit 0":  func() error { return semaphore(t, l, "x", 1).SetLimit(context.Background(), 0) },
		"nil ctx hold": func() error { _, _, err := semaphore(t, l, "x", 1).Holders(nilCtx); return err },
	} {
		assert.ErrorIs(t, fn(), mutex.ErrInvalid, name)
	}
	assert.Zero(t, evalCalls(c.Info(context.Background(), "commandstats").Val()), "bad input reached the server")
	var nilPermit *mutex.Permit
	assert.ErrorIs(t, nilPermit.Release(context.Background()), mutex.ErrNotHeld)
}

// Close releases the permits held (their contexts end with ErrReleased,
// the backend holds none) and makes waiting and later calls return
// ErrClosed.
func TestSemaphoreClose(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := mustLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a test that breaks fails, never hangs
	defer cancel()
	s := semaphore(t, l, "close", 1)
	p, err := s.Acquire(ctx)
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() { _, err := s.Acquire(ctx); got <- err }()
	require.Eventually(t, func() bool { return mutexhooks.SemaphoreSubscribed(l, "close") }, 5*time.Second, time.Millisecond)
	require.NoError(t, l.Close())
	assert.ErrorIs(t, <-got, mutex.ErrClosed)
	assert.ErrorIs(t, context.Cause(p.Context()), mutex.ErrReleased)
	_, err = s.Acquire(ctx)
	assert.ErrorIs(t, err, mutex.ErrClosed)
	other := semaphore(t, newLocker(t, c), "close", 1)
	_, holders, err := other.Holders(ctx)
	require.NoError(t, err)
	assert.Empty(t, holders)
}

// A lock and a permit of one Locker fall due together: the renewer's batch
// sends each to its own method, and both stay held past several leases.
func TestSemaphorePermitsRenewBesideLocks(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const ttl = 150 * time.Millisecond
	lk, err := l.Lock(ctx, "both", mutex.WithTTL(ttl))
	require.NoError(t, err)
	p, err := semaphore(t, l, "both", 1, mutex.WithTTL(ttl)).Acquire(ctx)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		held := adminOf(t, l).Held()
		return len(held) == 2 && held[0].Renewals >= 4 && held[1].Renewals >= 4
	}, 10*time.Second, time.Millisecond, "both renewed past several leases")
	assert.NoError(t, lk.Context().Err())
	assert.NoError(t, p.Context().Err())
	_, holders, err := semaphore(t, newLocker(t, c), "both", 1).Holders(ctx)
	require.NoError(t, err)
	require.Len(t, holders, 1)
	assert.Equal(t, p.Token(), holders[0].Token)
	require.NoError(t, p.Release(ctx))
	require.NoError(t, lk.Release(ctx))
}

// Holders only reads: it answers while the server holds writes (CLIENT
// PAUSE WRITE), as redfence inspect needs when an operator looks at a
// stuck deployment.
func TestSemaphoreHoldersDuringWritePause(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s := semaphore(t, l, "paused-writes", 2, mutex.WithTTL(time.Minute))
	p, err := s.Acquire(ctx)
	require.NoError(t, err)
	require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err())
	hctx, hcancel := context.WithTimeout(ctx, 5*time.Second)
	limit, holders, err := s.Holders(hctx)
	hcancel()
	require.NoError(t, c.Do(ctx, "CLIENT", "UNPAUSE").Err())
	require.NoError(t, err)
	assert.Equal(t, 2, limit)
	require.Len(t, holders, 1)
	assert.Equal(t, p.Token(), holders[0].Token)
	require.NoError(t, p.Release(ctx))
}
