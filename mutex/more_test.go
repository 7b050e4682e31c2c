package mutex_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

func TestClusterKeyChannelOneSlotAndSpread(t *testing.T) {
	cl := testutil.RedisCluster(t, 3)
	l := newLocker(t, cl.Client)
	ctx := context.Background()
	for _, key := range []string{"plain", "{tagged}", "a{b}c", "}x{", "{", "}", "{}", "x}y{z}"} {
		lk := mutex.LockKeyOf(l, key)
		ks, err := cl.Client.ClusterKeySlot(ctx, lk).Result()
		require.NoError(t, err)
		cs, err := cl.Client.ClusterKeySlot(ctx, mutex.ChannelOf(lk)).Result()
		require.NoError(t, err)
		assert.Equal(t, ks, cs, "key %q: lock key %q and channel in different slots", key, lk)
		got, err := l.TryLock(ctx, key)
		require.NoError(t, err, "key %q", key)
		require.NoError(t, got.Unlock(ctx))
	}
	// Many keys land on every master.
	for i := range 60 {
		lk, err := l.TryLock(ctx, "spread-"+strconv.Itoa(i), mutex.WithAutoRenew(false))
		require.NoError(t, err)
		require.NoError(t, lk.Unlock(ctx))
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
	require.NoError(t, inner.Unlock(ctx))
	held, err := other.Lock(ctx, "tel2")
	require.NoError(t, err)
	_, err = l.TryLock(ctx, "tel2")
	require.ErrorIs(t, err, mutex.ErrNotAcquired)
	require.NoError(t, held.Unlock(ctx))
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
	assert.True(t, attrMap(spans["redfence.Lock"][1].Attributes())["redfence.reentrant"].AsBool())
	require.Len(t, spans["redfence.TryLock"], 1)
	assert.Equal(t, "contended", attrMap(spans["redfence.TryLock"][0].Attributes())["redfence.outcome"].AsString())
	require.Len(t, spans["redfence.LockLost"], 1)
	assert.Equal(t, lk.Token(), attrMap(spans["redfence.LockLost"][0].Attributes())["redfence.token"].AsInt64())

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	sums := map[string]int64{}
	hist := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
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
	require.NoError(t, lk.Unlock(ctx))

	replica := testutil.StartRedis(t, testutil.WithRedisArgs("--replicaof", "127.0.0.1", fmt.Sprint(primary.Port())))
	rc := replica.Client()
	defer rc.Close()
	require.Eventually(t, func() bool {
		info, _ := c.Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 20*time.Millisecond)
	lk, err = l.Lock(ctx, "ack", mutex.WithReplicaAck(1, 2*time.Second))
	require.NoError(t, err)
	v, err := rc.Get(ctx, mutex.LockKeyOf(l, "ack")).Result()
	require.NoError(t, err, "the replica has the lock")
	assert.Contains(t, v, strconv.FormatInt(lk.Token(), 10))
	require.NoError(t, lk.Unlock(ctx))
}
