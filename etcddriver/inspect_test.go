package etcddriver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/mutex/backend"
)

// Inspect shows the holder, its token, count and lease; a free key is free.
func TestInspect(t *testing.T) {
	s := server(t)
	a, _, _ := locker(t, s)
	l, _, _ := locker(t, s)
	op := operator(t, l)
	ctx := testCtx(t)
	before := time.Now()
	lk, err := a.Lock(ctx, "i", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	in, err := op.Inspect(ctx, "i")
	require.NoError(t, err)
	assert.Equal(t, admin.Held, in.State)
	assert.Equal(t, lk.Token(), in.Token)
	assert.Equal(t, 1, in.Count)
	assert.NotEmpty(t, in.Owner)
	assert.Greater(t, in.Lease, 50*time.Second)
	assert.LessOrEqual(t, in.Lease, etcddriver.LeaseTTL(time.Minute), "the key's lease: the TTL and its reuse window")
	assert.False(t, in.AcquiredAt.Before(before.Truncate(time.Microsecond)), "acquired by the acquiring client's clock")
	require.NoError(t, lk.Release(ctx))
	in, err = op.Inspect(ctx, "i")
	require.NoError(t, err)
	assert.NotEqual(t, admin.Held, in.State)
}

// List pages through the held keys under the prefix with the backend's
// cursor, each key once, and shows no forced-release records.
func TestList(t *testing.T) {
	s := server(t)
	a, b, cli := locker(t, s)
	ctx := testCtx(t)
	want := map[string]int64{}
	for i := range 7 {
		lk, err := a.Lock(ctx, fmt.Sprintf("l%d", i), mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		want[lk.Key()] = lk.Token()
	}
	_, err := operator(t, a).ForceRelease(ctx, "l6", admin.ForceOptions{Reason: "list"}) // leaves a record beside it
	require.NoError(t, err)
	delete(want, "l6")

	_, err = cli.Put(ctx, "u/l9", "x") // another prefix's key: not the Driver's
	require.NoError(t, err)

	seen := map[string]int64{}
	cursor, pages := "", 0
	for {
		page, err := b.List(ctx, backend.ListRequest{Cursor: cursor, Count: 2})
		require.NoError(t, err)
		keys, next := page.Keys, page.Cursor
		assert.LessOrEqual(t, len(keys), 2)
		for _, k := range keys {
			_, dup := seen[k.Key]
			assert.False(t, dup, "listed twice: %s", k.Key)
			assert.Equal(t, testPrefix+k.Key, k.Name, "the key without the prefix, the etcd key as its name")
			seen[k.Key] = k.Token
		}
		pages++
		if next == "" {
			break
		}
		cursor = next
	}
	assert.Equal(t, want, seen)
	assert.Equal(t, 3, pages)

	all, err := operator(t, a).ListAll(ctx, admin.ListOptions{Match: "l*"})
	require.NoError(t, err)
	assert.Len(t, all, 6, "the Locker's listing over the backend")
	for _, in := range all {
		assert.Equal(t, testPrefix+in.Key, in.Name)
	}
}

// A forced release frees the key for a waiter of another Locker (woken by
// the watch), ends the holder's lock with ErrLockLost, leaves a token floor
// the next holder exceeds, and an audit record that Inspect shows.
func TestForceRelease(t *testing.T) {
	s := server(t)
	a, _, _ := locker(t, s)
	b, bb, _ := locker(t, s)
	l, _, _ := locker(t, s)
	op := operator(t, l)
	ctx := testCtx(t)
	lk, err := a.Lock(ctx, "f", mutex.WithTTL(3*time.Second))
	require.NoError(t, err)
	got := make(chan *mutex.Lock, 1)
	go func() {
		w, err := b.Lock(ctx, "f", mutex.WithRetry(time.Hour, time.Hour), mutex.WithTTL(time.Hour))
		assert.NoError(t, err)
		got <- w
	}()
	require.Eventually(t, func() bool { return etcddriver.Watching(bb) == 1 }, 10*time.Second, time.Millisecond)

	_, err = op.ForceRelease(ctx, "f", admin.ForceOptions{Token: lk.Token() + 7, Reason: "stuck"})
	assert.ErrorIs(t, err, mutex.ErrNotHeld, "another token")
	res, err := op.ForceRelease(ctx, "f", admin.ForceOptions{Token: lk.Token(), By: "ops", Reason: "stuck"})
	require.NoError(t, err)
	assert.Equal(t, lk.Token(), res.Token)
	assert.Equal(t, res.Token+1, res.Floor)

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
