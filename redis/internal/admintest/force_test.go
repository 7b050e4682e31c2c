package admintest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// A forced release ends the holder by its next renewal, well before its
// lease would, leaves a token floor every later token exceeds, wakes a
// waiter, is audited beside the key and counted by reason.
func TestForceRelease(t *testing.T) {
	eachInspectable(t, func(t *testing.T, c redis.UniversalClient) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		holder := newLocker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "stuck"}))
		op := viewerOf(t, c, mutex.WithMeterProvider(mp))
		next := newLocker(t, c)

		const ttl = 3 * time.Second
		lk, err := holder.Lock(ctx, "ledger", mutex.WithTTL(ttl))
		require.NoError(t, err)
		waiting := make(chan *mutex.Lock, 1)
		go func() {
			// An hour's poll: only the forced release's notification wakes it.
			nl, err := next.Lock(ctx, "ledger", mutex.WithRetry(time.Hour, time.Hour))
			assert.NoError(t, err)
			waiting <- nl
		}()
		waitFor(t, ctx, "the waiter never queued", func() bool {
			in, err := op.Inspect(ctx, "ledger")
			require.NoError(t, err)
			return len(in.Waiters) == 1
		})

		_, err = op.ForceRelease(ctx, "ledger", admin.ForceOptions{Token: lk.Token() + 1, Reason: "stuck job"})
		assert.ErrorIs(t, err, mutex.ErrNotHeld, "another token than the holder's changes nothing")

		held := adminOf(t, holder).Held()
		require.Len(t, held, 1)
		localDeadline := time.Now().Add(held[0].Lease)
		res, err := op.ForceRelease(ctx, "ledger", admin.ForceOptions{Token: lk.Token(), By: "alice", Reason: "stuck job"})
		require.NoError(t, err)
		assert.Equal(t, "ledger", res.Key)
		assert.Equal(t, lk.Token(), res.Token)
		assert.Equal(t, lk.Token()+1, res.Floor)
		assert.Equal(t, "stuck", res.Info.Service)
		assert.Equal(t, 1, res.Released)

		var nl *mutex.Lock
		select {
		case nl = <-waiting:
			assert.True(t, time.Now().Before(localDeadline), "the waiter was woken by its poll at the lease's end, not by the release")
		case <-ctx.Done():
			t.Fatal("the waiter was not woken")
		}
		require.NotNil(t, nl)
		assert.Greater(t, nl.Token(), res.Floor, "a later token exceeds the floor")

		select {
		case <-lk.Context().Done():
			assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
			assert.True(t, time.Now().Before(localDeadline), "the holder learnt of it from its lease running out, not from its renewal")
		case <-ctx.Done():
			t.Fatal("the old holder never learnt it lost the lock")
		}
		assert.ErrorIs(t, lk.Release(ctx), mutex.ErrNotHeld)
		in, err := op.Inspect(ctx, "ledger")
		require.NoError(t, err)
		assert.Equal(t, nl.Token(), in.Token, "the old holder's Release freed the next one's lock")
		require.Len(t, in.Forced, 1)
		f := in.Forced[0]
		assert.Equal(t, "alice", f.By)
		assert.Equal(t, "stuck job", f.Reason)
		assert.Equal(t, lk.Token(), f.Token)
		assert.Equal(t, res.Floor, f.Floor)
		assert.Equal(t, "stuck", f.Info.Service)
		assert.WithinDuration(t, in.ServerTime, f.At, 10*time.Second)
		require.NoError(t, nl.Release(ctx))

		_, err = op.ForceRelease(ctx, "ledger", admin.ForceOptions{Reason: "again"})
		assert.ErrorIs(t, err, mutex.ErrNotHeld, "a free key")

		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(ctx, &rm))
		assert.Equal(t, int64(1), forcedCount(rm, "stuck job"))
	})
}

// Without By, the audit names the Admin's Locker by its OwnerInfo.
func TestForceReleaseByDefault(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	lk, err := newLocker(t, c).Lock(ctx, "k", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	op := viewerOf(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "ops-tool", Host: "bastion", PID: 9}))
	_, err = op.ForceRelease(ctx, "k", admin.ForceOptions{Token: lk.Token(), Reason: "drill"})
	require.NoError(t, err)
	in, err := op.Inspect(ctx, "k")
	require.NoError(t, err)
	require.Len(t, in.Forced, 1)
	assert.Equal(t, mutex.OwnerInfo{Service: "ops-tool", Host: "bastion", PID: 9}.String(), in.Forced[0].By)
}

// A forced release over an outside backend: the holder loses the lock (its
// context ends with ErrLockLost), a waiter of another Locker takes it with
// a token above the floor, and Inspect shows the audit entry; a second
// release, or one of another token, finds nothing held.
func TestForceReleaseOverABackend(t *testing.T) {
	m := newMemory()
	a, b := testutil.WithBackend(t, m), testutil.WithBackend(t, m)
	op := adminOf(t, testutil.WithBackend(t, m))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lk, err := a.Lock(ctx, "f", mutex.WithTTL(600*time.Millisecond))
	require.NoError(t, err)
	got := make(chan *mutex.Lock, 1)
	go func() {
		w, err := b.Lock(ctx, "f", mutex.WithRetry(time.Hour, time.Hour), mutex.WithTTL(time.Hour))
		assert.NoError(t, err)
		got <- w
	}()
	require.Eventually(t, func() bool { return m.watched() == 1 }, 10*time.Second, time.Millisecond)

	_, err = op.ForceRelease(ctx, "f", admin.ForceOptions{Token: lk.Token() + 7, Reason: "stuck"})
	assert.ErrorIs(t, err, mutex.ErrNotHeld, "another token")
	res, err := op.ForceRelease(ctx, "f", admin.ForceOptions{Token: lk.Token(), By: "ops", Reason: "stuck"})
	require.NoError(t, err)
	assert.Equal(t, lk.Token(), res.Token)
	assert.Greater(t, res.Floor, res.Token)
	assert.Equal(t, 1, res.Released)

	w := <-got
	require.NotNil(t, w)
	assert.Greater(t, w.Token(), res.Floor, "later tokens exceed the floor")
	select {
	case <-lk.Context().Done():
	case <-ctx.Done():
		t.Fatal("the holder was never told")
	}
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)

	in, err := op.Inspect(ctx, "f")
	require.NoError(t, err)
	require.Len(t, in.Forced, 1)
	assert.Equal(t, "ops", in.Forced[0].By)
	assert.Equal(t, "stuck", in.Forced[0].Reason)
	assert.Equal(t, res.Token, in.Forced[0].Token)
	assert.Equal(t, res.Floor, in.Forced[0].Floor)
	require.NoError(t, w.Release(ctx))
	_, err = op.ForceRelease(ctx, "f", admin.ForceOptions{Reason: "again"})
	assert.ErrorIs(t, err, mutex.ErrNotHeld, "nobody holds it")
}
