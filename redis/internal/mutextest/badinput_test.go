package mutextest

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redfence/redfence/redis/internal/redisproto"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/internal/earlytrace"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// Every bad argument gets ErrInvalid, without a panic, a hang or a call to
// Redis.
func TestBadInput(t *testing.T) {
	c, _ := redistest.Redis(t)
	clients, _ := redlockNodes(t, 3)
	ok := newLocker(t, c)
	ctx := context.Background()
	var nilClient *redis.Client
	var nilCtx context.Context
	var nilLocker *mutex.Locker
	held, err := ok.Lock(ctx, "held")
	require.NoError(t, err)
	t.Cleanup(func() { _ = held.Release(ctx) })
	lock := func(opts ...mutex.LockOption) func() error {
		return func() error { _, err := ok.Lock(ctx, "k", opts...); return err }
	}
	// A bad option is the constructor's error: a Locker it built anyway
	// fails the case.
	built := func(l *mutex.Locker, err error) error {
		if err == nil {
			_ = l.Close()
			return errors.New("the constructor accepted it")
		}
		return err
	}
	build := func(opts ...any) func() error {
		return func() error { return built(redistest.NewLocker(c, opts...)) }
	}
	redlock := func(cs ...redis.UniversalClient) func() error {
		return func() error { return built(redistest.NewRedlock(cs)) }
	}
	redlockWith := func(opts ...any) func() error {
		return func() error { return built(redistest.NewRedlock(clients, opts...)) }
	}
	driver := func(c redis.UniversalClient) func() error {
		return func() error {
			d, err := redisdriver.New(c)
			if err == nil {
				_ = d.Close()
				return errors.New("the driver accepted it")
			}
			return err
		}
	}
	var nilDriver *redisdriver.Driver
	sameAddr := redis.NewClient(&redis.Options{Addr: clients[0].(*redis.Client).Options().Addr})
	t.Cleanup(func() { _ = sameAddr.Close() })
	cases := []struct {
		name string
		call func() error
	}{
		{"nil client", driver(nil)},
		{"typed nil client", driver(nilClient)},
		{"nil backend", func() error { return built(mutex.New(nil)) }},
		{"typed nil backend", func() error { return built(mutex.New(nilDriver)) }},
		{"nil locker Lock", func() error { _, err := nilLocker.Lock(ctx, "k"); return err }},
		{"nil locker TryLock", func() error { _, err := nilLocker.TryLock(ctx, "k"); return err }},
		{"nil locker Do", func() error { return nilLocker.Do(ctx, "k", func(context.Context, *mutex.Lock) error { return nil }) }},
		{"nil locker LockAll", func() error { _, err := nilLocker.LockAll(ctx, []string{"k"}); return err }},
		{"nil locker TryLockAll", func() error { _, err := nilLocker.TryLockAll(ctx, []string{"k"}); return err }},
		{"empty key", func() error { _, err := ok.Lock(ctx, ""); return err }},
		{"key over MaxKeyLen", func() error { _, err := ok.Lock(ctx, strings.Repeat("k", mutex.MaxKeyLen+1)); return err }},
		{"nil context Lock", func() error { _, err := ok.Lock(nilCtx, "k"); return err }},
		{"nil context TryLock", func() error { _, err := ok.TryLock(nilCtx, "k"); return err }},
		{"nil context Do", func() error { return ok.Do(nilCtx, "k", func(context.Context, *mutex.Lock) error { return nil }) }},
		{"zero TTL", lock(mutex.WithTTL(0))},
		{"negative TTL", lock(mutex.WithTTL(-time.Second))},
		{"sub-ms TTL", lock(mutex.WithTTL(time.Microsecond))},
		{"2ms TTL, shorter than a round trip and the drift", lock(mutex.WithTTL(2 * time.Millisecond))},
		{"TTL just below MinTTL", lock(mutex.WithTTL(mutex.MinTTL - time.Millisecond))},
		{"TTL above MaxTTL", lock(mutex.WithTTL(mutex.MaxTTL + time.Millisecond))},
		{"150-year TTL", lock(mutex.WithTTL(150 * 365 * 24 * time.Hour))},
		{"retry max below min", lock(mutex.WithRetry(time.Second, time.Millisecond))},
		{"negative retry", lock(mutex.WithRetry(-1, time.Second))},
		{"zero retry", lock(mutex.WithRetry(0, time.Second))},
		{"empty owner", lock(mutex.WithOwner(""))},
		{"owner over 512 bytes", lock(mutex.WithOwner(strings.Repeat("o", 513)))},
		{"negative replica ack", lock(mutex.WithReplicaAck(-1, time.Second))},
		{"replica ack without timeout", lock(mutex.WithReplicaAck(1, 0))},
		{"negative replica ack timeout", lock(mutex.WithReplicaAck(1, -time.Second))},
		{"brace prefix", build(redisdriver.WithPrefix("a{b"))},
		{"short fence TTL", build(redisdriver.WithFenceTTL(time.Millisecond))},
		{"drift factor 0.5", build(mutex.WithClockDrift(0.5, 0))},
		{"negative drift factor", build(mutex.WithClockDrift(-0.1, 0))},
		{"negative drift min", build(mutex.WithClockDrift(0.01, -time.Millisecond))},
		{"nil clock", build(mutex.WithClock(nil))},
		{"OwnerInfo negative pid", build(mutex.WithOwnerInfo(mutex.OwnerInfo{PID: -1}))},
		{"zero store timeout", redlockWith(redlockdriver.WithStoreTimeout(0))},
		{"Redlock brace prefix", redlockWith(redlockdriver.WithPrefix("a}"))},
		{"Redlock short fence TTL", redlockWith(redlockdriver.WithFenceTTL(time.Millisecond))},
		{"Redlock bad Locker option", redlockWith(mutex.WithClockDrift(0.5, 0))},
		{"nil fn", func() error { return ok.Do(ctx, "k", nil) }},
		{"Extend to zero", func() error { return held.Extend(ctx, 0) }},
		{"Extend below MinTTL", func() error { return held.Extend(ctx, time.Millisecond) }},
		{"Extend above MaxTTL", func() error { return held.Extend(ctx, 150*365*24*time.Hour) }},
		{"Extend nil context", func() error { return held.Extend(nilCtx, time.Second) }},
		{"Unlock nil context", func() error { return held.Release(nilCtx) }},
		{"TTL nil context", func() error { _, err := held.TTL(nilCtx); return err }},
		{"Redlock of two", redlock(clients[:2]...)},
		{"Redlock of none", redlock()},
		{"Redlock nil node", redlock(clients[0], nil, clients[2])},
		{"Redlock typed nil node", redlock(clients[0], nilClient, clients[2])},
		{"Redlock one client three times", redlock(clients[0], clients[0], clients[0])},
		{"Redlock two clients of one server", redlock(clients[0], sameAddr, clients[2])},
	}
	before, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := testutil.Safely(t, 5*time.Second, tc.call)
			assert.ErrorIs(t, err, mutex.ErrInvalid)
			assert.NotErrorIs(t, err, mutex.ErrNotAcquired)
		})
	}
	after, err := c.Info(ctx, "commandstats").Result()
	require.NoError(t, err)
	assert.Equal(t, evalCalls(before), evalCalls(after), "bad input must not reach Redis")

	var nilLock *mutex.Lock
	assert.ErrorIs(t, nilLock.Release(ctx), mutex.ErrNotHeld)
	assert.ErrorIs(t, nilLock.Extend(ctx, time.Second), mutex.ErrNotHeld)
	_, err = nilLock.TTL(ctx)
	assert.ErrorIs(t, err, mutex.ErrNotHeld)
	assert.ErrorIs(t, context.Cause(nilLock.Context()), mutex.ErrNotHeld)
	jctx, cancel := nilLock.Join(ctx)
	cancel()
	assert.ErrorIs(t, context.Cause(jctx), mutex.ErrNotHeld)

	assert.NotPanics(t, func() {
		l := newLocker(t, c, mutex.WithTracerProvider((*sdktrace.TracerProvider)(nil)),
			mutex.WithMeterProvider((*sdkmetric.MeterProvider)(nil)))
		lk, err := l.Lock(ctx, "typed-nil providers")
		require.NoError(t, err, "typed-nil providers mean the globals")
		require.NoError(t, lk.Release(ctx))
	})

	rl := newRedlock(t, clients)
	_, err = rl.Lock(ctx, "x", mutex.WithReplicaAck(1, time.Second))
	assert.ErrorIs(t, err, mutex.ErrInvalid, "WithReplicaAck on Redlock")
}

// The owner info costs nothing to the protocol: it is inside the owner id,
// which a longer OwnerInfo lengthens up to its bound; past it, New refuses
// the option.
func TestOwnerInfoBound(t *testing.T) {
	c, calls := redistest.DeadClient(t)
	l, err := redistest.NewLocker(c, mutex.WithOwnerInfo(mutex.OwnerInfo{Label: strings.Repeat("x", 300)}))
	assert.ErrorIs(t, err, mutex.ErrInvalid)
	assert.Nil(t, l)
	l, err = redistest.NewLocker(c, mutex.WithOwnerInfo(mutex.OwnerInfo{Label: strings.Repeat("x", 100)}))
	require.NoError(t, err, "a label within the bound")
	require.NoError(t, l.Close())
	assert.Zero(t, calls.N(), "New sends nothing")
}

// A lease can never be so long that the key (and its fencing counter)
// expires first: the 150-year TTL that once overflowed the key's TTL and let
// a second holder in is refused, and the longest lease allowed keeps its key
// at least as long as the lease, whatever the fence TTL.
func TestLongLeaseKeepsItsKey(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c, redisdriver.WithFenceTTL(time.Second))
	ctx := context.Background()
	_, err := l.TryLock(ctx, "long", mutex.WithTTL(150*365*24*time.Hour))
	require.ErrorIs(t, err, mutex.ErrInvalid)

	lk, err := l.TryLock(ctx, "long", mutex.WithTTL(mutex.MaxTTL), mutex.WithAutoRenew(false))
	require.NoError(t, err)
	defer lk.Release(ctx)
	pttl, err := c.PTTL(ctx, redisproto.LockKey(redisproto.DefaultPrefix, "long")).Result()
	require.NoError(t, err)
	assert.GreaterOrEqual(t, pttl, mutex.MaxTTL-time.Minute, "the key expires before the lease")
	_, err = newLocker(t, c).TryLock(ctx, "long")
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
}

// An acquisition whose grant arrives after its lease ran out is never
// handed out. TryLock says the server was too slow for the lease, and the
// key is freed behind it long before its minute-long lease could run out;
// Lock tries again, with a fresh owner id, and returns a lock Redis holds.
func TestGrantAfterTheLeaseIsGivenBack(t *testing.T) {
	c, _ := redistest.Redis(t)
	var readings atomic.Int64
	// The second reading of the clock, the one that judges the first
	// grant, comes two minutes late: after a one-minute lease.
	lateOnce := mutex.WithClock(func() time.Time {
		if readings.Add(1) == 2 {
			return time.Now().Add(2 * time.Minute)
		}
		return time.Now()
	})
	ctx := context.Background()
	_, err := newLocker(t, c, lateOnce).TryLock(ctx, "slow", mutex.WithTTL(time.Minute))
	require.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.NotErrorIs(t, err, mutex.ErrNotAcquired)
	assert.Contains(t, err.Error(), "longer than the lease")
	other := newLocker(t, c)
	require.Eventually(t, func() bool {
		lk, err := other.TryLock(ctx, "slow")
		if err != nil {
			return false
		}
		require.NoError(t, lk.Release(ctx))
		return true
	}, 10*time.Second, 5*time.Millisecond, "the late grant was not given back")

	readings.Store(0)
	lk, err := newLocker(t, c, lateOnce).Lock(ctx, "slow", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	_, err = lk.TTL(ctx)
	require.NoError(t, err, "Lock returned a lock Redis does not hold for it")
	_, err = other.TryLock(ctx, "slow")
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	require.NoError(t, lk.Release(ctx))
}

// Lock that gives up against a server that refuses connections says why:
// the server's error (errors.Is ECONNREFUSED) beside ErrNotAcquired, the
// context's error and ErrUnavailable, even when its deadline hit an attempt
// in flight. Each failed attempt is counted by error.type and recorded on
// the span while Lock retries.
func TestLockGivesUpWithTheServerError(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	c := redis.NewClient(&redis.Options{Addr: testutil.RefusedAddr(t)}) // go-redis's defaults: retries, 1.7s a failure
	t.Cleanup(func() { _ = c.Close() })
	l := newLocker(t, c, mutex.WithMeterProvider(mp), mutex.WithTracerProvider(tp))

	// 3s: long enough for one failed attempt, and the deadline falls in the next.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := l.Lock(ctx, "down")
	require.Error(t, err)
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED, "the server's error is lost: %v", err)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	failed := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "redfence.lock.attempt.errors" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				typ, _ := dp.Attributes.Value("error.type")
				failed[typ.AsString()] += dp.Value
			}
		}
	}
	assert.GreaterOrEqual(t, failed["dial"], int64(1), "failed attempts by error.type: %v", failed)

	spans := rec.Ended()
	require.Len(t, spans, 1)
	exceptions := 0
	for _, ev := range spans[0].Events() {
		if ev.Name == "exception" {
			exceptions++
		}
	}
	assert.GreaterOrEqual(t, exceptions, 2, "each failed attempt and the outcome on the span")
}

// Contention and outage stay apart: ErrNotAcquired alone when another
// owner holds the key, ErrUnavailable when the server gave no answer.
func TestContentionAndOutageAreDistinct(t *testing.T) {
	c, srv := redistest.Redis(t)
	a, b := newLocker(t, c), newLocker(t, c)
	ctx := context.Background()
	lk, err := a.Lock(ctx, "busy")
	require.NoError(t, err)
	defer lk.Release(ctx)

	_, err = b.TryLock(ctx, "busy")
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.NotErrorIs(t, err, mutex.ErrUnavailable)
	wctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	_, err = b.Lock(wctx, "busy")
	cancel()
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.NotErrorIs(t, err, mutex.ErrUnavailable, "the key was busy, the server up: %v", err)

	down := redis.NewClient(&redis.Options{Addr: testutil.RefusedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	_, err = newLocker(t, down).TryLock(ctx, "busy")
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.ErrorIs(t, err, syscall.ECONNREFUSED)
	assert.NotErrorIs(t, err, mutex.ErrNotAcquired)

	// A hung server: the wait ends before any answer.
	hung := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = hung.Close() })
	require.NoError(t, hung.Ping(ctx).Err())
	srv.Pause()
	t.Cleanup(srv.Resume)
	wctx, cancel = context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = newLocker(t, hung).Lock(wctx, "other")
	cancel()
	srv.Resume()
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.ErrorIs(t, err, mutex.ErrUnavailable, "no answer at all is an outage: %v", err)
}

// A Redlock attempt that cannot reach its quorum says so, node by node,
// without blaming a deadline the caller never set; contention says which
// nodes were held.
func TestRedlockQuorumErrorSaysWhy(t *testing.T) {
	clients, _ := redlockNodes(t, 3)
	ctx := context.Background()
	down := []redis.UniversalClient{clients[0]}
	var downAddrs []string
	for range 2 {
		addr := testutil.RefusedAddr(t)
		downAddrs = append(downAddrs, addr)
		c := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = c.Close() })
		down = append(down, c)
	}
	l := newRedlock(t, down)
	err := testutil.Safely(t, 10*time.Second, func() error { _, err := l.TryLock(ctx, "q"); return err })
	var qerr *redlockdriver.QuorumError
	require.ErrorAs(t, err, &qerr)
	assert.ErrorIs(t, err, mutex.ErrUnavailable)
	assert.NotErrorIs(t, err, mutex.ErrNotAcquired)
	assert.NotErrorIs(t, err, context.DeadlineExceeded, "the caller set no deadline")
	assert.Equal(t, 2, qerr.Quorum)
	assert.NoError(t, qerr.Nodes[0], "node 0 granted")
	for i, addr := range downAddrs {
		assert.Error(t, qerr.Nodes[i+1])
		assert.Contains(t, err.Error(), addr)
	}

	holder := newRedlock(t, clients)
	lk, err := holder.Lock(ctx, "held")
	require.NoError(t, err)
	defer lk.Release(ctx)
	_, err = newRedlock(t, clients).TryLock(ctx, "held")
	require.ErrorAs(t, err, &qerr)
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.NotErrorIs(t, err, mutex.ErrUnavailable)
	assert.Contains(t, err.Error(), "held by another owner")
}

// Do's fn runs under a context that ends with the caller's (its cause
// saying so) and with the lock, and reports the caller's deadline.
func TestDoEndsWithTheCallersContext(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	stop := errors.New("caller stopped")
	ctx, cancel := context.WithCancelCause(context.Background())
	dctx, dcancel := context.WithTimeout(ctx, time.Minute)
	defer dcancel()
	err := l.Do(dctx, "do", func(fctx context.Context, lk *mutex.Lock) error {
		dl, ok := fctx.Deadline()
		assert.True(t, ok, "fn's context carries the caller's deadline")
		want, _ := dctx.Deadline()
		assert.Equal(t, want, dl)
		require.NoError(t, fctx.Err())
		cancel(stop)
		<-fctx.Done()
		assert.ErrorIs(t, context.Cause(fctx), stop, "the cause says the caller ended it")
		assert.NoError(t, lk.Context().Err(), "the lock itself is still held")
		return fctx.Err()
	})
	assert.ErrorIs(t, err, context.Canceled)

	err = l.Do(context.Background(), "do", func(fctx context.Context, lk *mutex.Lock) error {
		require.NoError(t, c.Del(context.Background(), redisproto.LockKey(redisproto.DefaultPrefix, "do")).Err())
		_, err := lk.TTL(context.Background()) // finds it gone: lost
		assert.ErrorIs(t, err, mutex.ErrNotHeld)
		<-fctx.Done()
		assert.ErrorIs(t, context.Cause(fctx), mutex.ErrLockLost)
		return nil
	})
	assert.NoError(t, err)
}

// A program that installs its global TracerProvider in an init that runs
// before this package's gets spans (the check for "no provider yet" once
// compared against a provider captured at this package's init). It needs a
// process of its own (see TestSpansOnceAGlobalProviderIsSet).
func TestSpansWithAProviderSetInAnEarlierInit(t *testing.T) {
	if os.Getenv(earlytrace.Env) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpansWithAProviderSetInAnEarlierInit$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), earlytrace.Env+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child process:\n%s", out)
		require.Contains(t, string(out), "--- PASS: TestSpansWithAProviderSetInAnEarlierInit", "child process:\n%s", out)
		return
	}
	require.NotNil(t, earlytrace.Provider)
	c, _ := redistest.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	lk, err := l.Lock(ctx, "early")
	require.NoError(t, err)
	require.NoError(t, lk.Release(ctx))
	assert.ElementsMatch(t, []string{"redfence.Lock", "redfence.Release"}, earlytrace.Provider.Ended())
}

// Close of a Redlock Locker with a node paused takes the node timeout for
// its own release and then only what calls already sent to the paused node
// take to time out in the client (its ReadTimeout): not a wait per lock.
func TestRedlockCloseWithAPausedNode(t *testing.T) {
	_, srvs := redistest.RedisN(t, 3)
	const nodeTimeout, readTimeout = 100 * time.Millisecond, 300 * time.Millisecond
	clients := make([]redis.UniversalClient, 3)
	for i, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), ReadTimeout: readTimeout, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	l, err := redistest.NewRedlock(clients, redlockdriver.WithStoreTimeout(nodeTimeout))
	require.NoError(t, err)
	ctx := context.Background()
	for _, key := range []string{"a", "b", "c", "d", "e"} {
		_, err := l.Lock(ctx, key)
		require.NoError(t, err)
	}
	srvs[2].Pause()
	t.Cleanup(srvs[2].Resume)
	late := testutil.MeasureLateness(t)
	start := time.Now()
	require.NoError(t, l.Close(), "a majority released")
	took := time.Since(start)
	// The settling wait and the release, a node timeout each, then the
	// client's read timeout for the call still out to the paused node,
	// and slack for -race; Close once took 2 s at least, whatever the
	// node timeout.
	assert.Less(t, took, late.Bound(2*nodeTimeout+readTimeout+500*time.Millisecond), "Close took %v", took)
}

// The backend lends the deployment's client to adapters
// (redisdriver.ClientOf), and a Redlock Locker's none, whose data no
// single node holds.
func TestClientOfEachBackend(t *testing.T) {
	c, _ := redistest.Redis(t)
	assert.Equal(t, redis.UniversalClient(c), redisdriver.ClientOf(newLocker(t, c).Backend()))
	clients, _ := redlockNodes(t, 3)
	assert.Nil(t, redisdriver.ClientOf(newRedlock(t, clients).Backend()))
	var nilLocker *mutex.Locker
	assert.Nil(t, nilLocker.Backend())
	assert.Nil(t, redisdriver.ClientOf(nilLocker.Backend()))
}

// A server that hangs after it answered "held" is still an outage when
// Lock gives up: the attempt it left unanswered went on past the shortest
// poll, which a healthy server never takes.
func TestHungAfterContentionIsAnOutage(t *testing.T) {
	c, srv := redistest.Redis(t)
	holder := newLocker(t, c)
	ctx := context.Background()
	lk, err := holder.Lock(ctx, "hang")
	require.NoError(t, err)
	t.Cleanup(func() { _ = lk.Release(ctx) })

	waiter := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // go-redis's 5 s read timeout
	t.Cleanup(func() { _ = waiter.Close() })
	w := newLocker(t, waiter)
	got := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := w.Lock(wctx, "hang", mutex.WithRetry(50*time.Millisecond, 100*time.Millisecond))
		got <- err
	}()
	awaitQueued(t, c, redisproto.QueueOf(redisproto.LockKey(redisproto.DefaultPrefix, "hang")), 1) // answered "held"
	srv.Pause()
	t.Cleanup(srv.Resume)
	err = <-got
	srv.Resume()
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, err, mutex.ErrUnavailable, "a hung server reported as a busy key: %v", err)
}
