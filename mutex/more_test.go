package mutex_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

func TestClusterKeyChannelOneSlotAndSpread(t *testing.T) {
	cl := testutil.RedisCluster(t, 3)
	l := newLocker(t, cl.Client)
	ctx := context.Background()
	for _, key := range []string{"plain", "{tagged}", "a{b}c", "}x{", "{", "}", "{}", "x}y{z}"} {
		lk := mutex.LockKeyOf(key)
		ks, err := cl.Client.ClusterKeySlot(ctx, lk).Result()
		require.NoError(t, err)
		cs, err := cl.Client.ClusterKeySlot(ctx, mutex.ChannelOf(lk)).Result()
		require.NoError(t, err)
		assert.Equal(t, ks, cs, "key %q: lock key %q and channel in different slots", key, lk)
		got, err := l.TryLock(ctx, key)
		require.NoError(t, err, "key %q", key)
		require.NoError(t, got.Release(ctx))
	}
	// Many keys land on every master.
	for i := range 60 {
		lk, err := l.TryLock(ctx, "spread-"+strconv.Itoa(i), mutex.WithAutoRenew(false))
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	}
	for _, m := range cl.Masters {
		n, err := m.Client().DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Positive(t, n, "master %s holds no lock keys", m.Addr())
	}
}

func TestTelemetry(t *testing.T) {
	c, _ := testutil.Redis(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	l := newLocker(t, c, mutex.WithTracerProvider(tp), mutex.WithMeterProvider(mp))
	other := newLocker(t, c)
	ctx := context.Background()

	lk, err := l.Lock(ctx, "tel", mutex.WithTTL(300*time.Millisecond))
	require.NoError(t, err)
	inner, err := l.Lock(lk.Context(), "tel")
	require.NoError(t, err)
	require.NoError(t, inner.Release(ctx))
	held, err := other.Lock(ctx, "tel2")
	require.NoError(t, err)
	_, err = l.TryLock(ctx, "tel2")
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	require.NoError(t, held.Release(ctx))
	require.NoError(t, c.FlushAll(ctx).Err())
	<-lk.Context().Done()

	spans := map[string][]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		spans[s.Name()] = append(spans[s.Name()], s)
	}
	require.Len(t, spans["redfence.Lock"], 2)
	attrs := attrMap(spans["redfence.Lock"][0].Attributes())
	assert.Equal(t, "tel", attrs["redfence.key"].AsString())
	assert.Equal(t, lk.Token(), attrs["redfence.token"].AsInt64())
	assert.Equal(t, "acquired", attrs["redfence.outcome"].AsString())
	assert.EqualValues(t, 1, attrs["redfence.attempts"].AsInt64())
	assert.False(t, attrs["redfence.reentrant"].AsBool())
	assert.Contains(t, attrs, "redfence.wait")
	assert.Less(t, attrs["redfence.wait"].AsFloat64(), 5.0, "redfence.wait is in seconds")
	for _, ss := range spans {
		for _, s := range ss {
			assert.Equal(t, trace.SpanKindInternal, s.SpanKind(), s.Name())
			assert.Equal(t, "github.com/redfence/redfence/mutex", s.InstrumentationScope().Name, s.Name())
			assert.NotEmpty(t, s.InstrumentationScope().Version, s.Name())
		}
	}
	assert.True(t, attrMap(spans["redfence.Lock"][1].Attributes())["redfence.reentrant"].AsBool())
	require.Len(t, spans["redfence.TryLock"], 1)
	assert.Equal(t, "contended", attrMap(spans["redfence.TryLock"][0].Attributes())["redfence.outcome"].AsString())
	require.Len(t, spans["redfence.LockLost"], 1)
	assert.Equal(t, lk.Token(), attrMap(spans["redfence.LockLost"][0].Attributes())["redfence.token"].AsInt64())

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	sums := map[string]int64{}
	hist := map[string]uint64{}
	units := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		assert.Equal(t, "github.com/redfence/redfence/mutex", sm.Scope.Name)
		assert.NotEmpty(t, sm.Scope.Version)
		for _, m := range sm.Metrics {
			units[m.Name] = m.Unit
			switch d := m.Data.(type) {
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					sums[m.Name] += p.Value
				}
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					hist[m.Name] += p.Count
				}
			}
		}
	}
	assert.EqualValues(t, 3, sums["redfence.lock.acquisitions"], "acquired, reentered, contended")
	assert.EqualValues(t, 1, sums["redfence.lock.contention"])
	assert.EqualValues(t, 1, sums["redfence.lock.losses"])
	assert.EqualValues(t, 0, sums["redfence.lock.held"], "nothing held at the end")
	assert.EqualValues(t, 3, hist["redfence.lock.acquire.duration"])
	assert.EqualValues(t, 1, hist["redfence.lock.hold.duration"])
	assert.Equal(t, map[string]string{
		"redfence.lock.acquire.duration": "s",
		"redfence.lock.acquisitions":     "{acquisition}",
		"redfence.lock.contention":       "{attempt}",
		"redfence.lock.losses":           "{lock}",
		"redfence.lock.hold.duration":    "s",
		"redfence.lock.held":             "{lock}",
	}, units)
}

func attrMap(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := map[string]attribute.Value{}
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

func TestReplicaAck(t *testing.T) {
	c, primary := testutil.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()

	_, err := l.Lock(ctx, "ack", mutex.WithReplicaAck(1, 100*time.Millisecond))
	var ackErr *mutex.ReplicaAckError
	require.ErrorAs(t, err, &ackErr, "no replica: too few acks")
	assert.ErrorIs(t, err, mutex.ErrNotAcquired)
	assert.Equal(t, 0, ackErr.Got)
	lk, err := l.TryLock(ctx, "ack")
	require.NoError(t, err, "the unacknowledged lock was released")
	require.NoError(t, lk.Release(ctx))

	replica := testutil.StartRedis(t, testutil.WithRedisArgs("--replicaof", "127.0.0.1", fmt.Sprint(primary.Port())))
	rc := replica.Client()
	defer rc.Close()
	require.Eventually(t, func() bool {
		info, _ := c.Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 20*time.Millisecond)
	lk, err = l.Lock(ctx, "ack", mutex.WithReplicaAck(1, 2*time.Second))
	require.NoError(t, err)
	v, err := rc.Get(ctx, mutex.LockKeyOf("ack")).Result()
	require.NoError(t, err, "the replica has the lock")
	assert.Contains(t, v, strconv.FormatInt(lk.Token(), 10))
	require.NoError(t, lk.Release(ctx))
}

// TestLeaseOverBeforeTheReply: the acquire's reply arrives after the lease
// it asked for has run out (the server was paused meanwhile). That grant is
// given back, never handed out; Lock tries again and returns a live lock,
// and the Locker closes promptly.
func TestLeaseOverBeforeTheReply(t *testing.T) {
	_, srv := testutil.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	sent := &sentHook{at: make(chan struct{}, 1)}
	c.AddHook(sent)
	l := mustLocker(t, c)
	ctx := context.Background()
	warm, err := l.Lock(ctx, "late")
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	srv.Pause()
	sent.armed.Store(true)
	type result struct {
		lk       *mutex.Lock
		err      error
		returned time.Time
	}
	got := make(chan result, 1)
	go func() {
		lk, err := l.Lock(ctx, "late", mutex.WithTTL(50*time.Millisecond))
		got <- result{lk, err, time.Now()}
	}()
	<-sent.at                          // the acquire is on its way to the paused server
	time.Sleep(200 * time.Millisecond) // the pause: four leases long
	srv.Resume()
	r := <-got
	require.NoError(t, r.err)
	assert.True(t, r.lk.Deadline().After(r.returned), "Lock returned a lock whose lease had already ended")
	if err := r.lk.Release(ctx); err != nil {
		assert.ErrorIs(t, err, mutex.ErrNotHeld, "a 50ms lease may run out under load")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close hung")
	}
}

// sentHook signals once armed, when the next command is sent.
type sentHook struct {
	armed atomic.Bool
	at    chan struct{} // buffered, one
}

func (h *sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.CompareAndSwap(true, false) {
			h.at <- struct{}{}
		}
		return next(ctx, cmd)
	}
}
func (h *sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// pipelines counts pipelined round trips (renewal batches).
type pipelines struct{ n atomic.Int64 }

func (p *pipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (p *pipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (p *pipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { p.n.Add(1); return next(ctx, cmds) }
}

// TestFailedRenewalsBackOff: with the server gone, renewals fail at once;
// the loop retries every TTL/10 until the lease ends, not in a tight loop
// (it once spun, thousands of attempts, never reaching its stop signal), and
// Close returns promptly.
func TestFailedRenewalsBackOff(t *testing.T) {
	_, srv := testutil.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	var p pipelines
	c.AddHook(&p)
	l := mustLocker(t, c)
	ctx := context.Background()
	lk, err := l.Lock(ctx, "gone", mutex.WithTTL(900*time.Millisecond))
	require.NoError(t, err)
	srv.Kill()
	<-lk.Context().Done() // renewals fail from 300 ms until the lease ends
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	assert.Less(t, p.n.Load(), int64(30), "renewal attempts while the server was gone")
	t.Logf("%d renewal round trips", p.n.Load())
	late := testutil.MeasureLateness(t)
	start := time.Now()
	require.NoError(t, l.Close())
	assert.Less(t, time.Since(start), late.Bound(time.Second))
}

// TestShortCyclesDoNotWakeTheRenewer: a stream of Lock/Unlock cycles with one
// TTL wakes the renewal loop about once, not once per renewal period: when
// the loop finds nothing to renew it stays due as the last lock would have
// been, so a lock taken after it, with the same TTL, falls due later and
// need not wake it. (It used to sleep for an hour then, and the next Lock
// woke it: a context switch on the Lock path.) A lock with a shorter TTL
// still wakes the loop, and is renewed.
func TestShortCyclesDoNotWakeTheRenewer(t *testing.T) {
	c, _ := testutil.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	// 30 ms leases fall due every 10 ms: 300 ms of cycles span 30 periods,
	// at whose ends the loop mostly finds no lock held. A pause of more than
	// a period between two Locks (a busy host's) lets the loop go idle, and
	// the next Lock rightly wakes it: those are allowed for.
	const ttl, period = 30 * time.Millisecond, 10 * time.Millisecond
	pauses := int64(0)
	var prev time.Time
	for start := time.Now(); time.Since(start) < 300*time.Millisecond; {
		now := time.Now()
		if !prev.IsZero() && now.Sub(prev) > period {
			pauses++
		}
		prev = now
		lk, err := l.Lock(ctx, "cycle", mutex.WithTTL(ttl))
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	}
	assert.LessOrEqual(t, mutex.RenewWakes(l), 3+pauses, "renewal loop woken by short cycles (%d pauses)", pauses)

	lk, err := l.Lock(ctx, "long", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	// Wait for the loop to sleep until the long lock is due.
	require.Eventually(t, func() bool {
		return mutex.RenewAsleep(l).After(time.Now().Add(10 * time.Second))
	}, 2*time.Second, time.Millisecond, "the loop never planned for the long lock")
	before := mutex.RenewWakes(l)
	// Due in a third of a second, long before the loop would wake; its
	// renewals may come 660 ms late, which a busy host does not reach.
	short, err := l.Lock(ctx, "short", mutex.WithTTL(time.Second))
	require.NoError(t, err)
	assert.Equal(t, before+1, mutex.RenewWakes(l), "a lock due before the loop wakes must wake it")
	select {
	case <-short.Context().Done():
		t.Fatalf("short lock lost: %v", context.Cause(short.Context()))
	case <-time.After(2 * time.Second): // two leases
	}
	require.NoError(t, short.Release(ctx))
	require.NoError(t, lk.Release(ctx))
}

// The acquire script answers the common case with the token alone and a
// held lock with minus its remaining lease; anything else it could not have
// sent is an error, never a panic.
func TestAcquireReplies(t *testing.T) {
	for _, tc := range []struct {
		reply any
		want  [3]int64
		str   string
	}{
		{"1795972944858361", [3]int64{1, 1795972944858361, 0}, "1795972944858361"},
		{int64(-250), [3]int64{0, 0, 250}, ""},
		{[]any{int64(2), "1795972944858361", int64(3)}, [3]int64{2, 1795972944858361, 3}, "1795972944858361"},
	} {
		n, s, err := mutex.ParseAcquire(tc.reply)
		require.NoError(t, err, "%#v", tc.reply)
		assert.Equal(t, tc.want, n, "%#v", tc.reply)
		assert.Equal(t, tc.str, s, "%#v", tc.reply)
	}
	for _, bad := range []any{nil, int64(0), int64(7), "", "12a", []any{int64(1)}, []any{"x", "y", "z"}, 3.5} {
		_, _, err := mutex.ParseAcquire(bad)
		assert.Error(t, err, "%#v", bad)
	}
}

// A Locker on the global TracerProvider (no WithTracerProvider) starts no
// spans while nothing is installed (otel's default makes only non-recording
// ones), and records them once a program installs an SDK, even after the
// Locker was built. otel's default delegates to the first provider set, once
// per process, so the test runs in a fresh process of its own (this binary
// again): repeatable under -count, and the package's other tests never see a
// global provider.
func TestSpansOnceAGlobalProviderIsSet(t *testing.T) {
	const env = "REDFENCE_SPANS_CHILD"
	if os.Getenv(env) == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSpansOnceAGlobalProviderIsSet$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), env+"=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "child process:\n%s", out)
		require.Contains(t, string(out), "--- PASS: TestSpansOnceAGlobalProviderIsSet", "child process:\n%s", out)
		return
	}
	require.True(t, mutex.IsUnsetGlobal(otel.GetTracerProvider()), "the child process starts with otel's default provider")
	c, _ := testutil.Redis(t)
	l := newLocker(t, c)
	ctx := context.Background()
	cycle := func(key string) {
		t.Helper()
		lk, err := l.Lock(ctx, key)
		require.NoError(t, err)
		require.NoError(t, lk.Release(ctx))
	}
	cycle("before")
	assert.False(t, mutex.StartsSpans(l), "a span started while no provider is installed: three allocations for nothing")

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	otel.SetTracerProvider(tp)
	cycle("after")

	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
		var key string
		for _, a := range s.Attributes() {
			if a.Key == "redfence.key" {
				key = a.Value.AsString()
			}
		}
		assert.Equal(t, "after", key, s.Name())
	}
	assert.ElementsMatch(t, []string{"redfence.Lock", "redfence.Unlock"}, names)
	assert.True(t, mutex.StartsSpans(l), "no span once a provider is installed")
}
