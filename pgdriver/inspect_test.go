package pgdriver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// TestInspectListAndForceRelease: an operator's Locker over the same table
// sees another process's hold (owner, token, lease on the database's
// clock), lists every key across pages, and force-releases the hold: the
// holder's lock is lost and its Extend refused, the next holder's token is
// above the floor, and the audit record shows in Inspect.
func TestInspectListAndForceRelease(t *testing.T) {
	_, schema := setup(t)
	ctx := t.Context()
	holder, _, _ := locker(t, schema, "holder")
	op, _, _ := locker(t, schema, "operator")
	adm, err := admin.New(op)
	require.NoError(t, err)

	free, err := adm.Inspect(ctx, "job")
	require.NoError(t, err)
	assert.Equal(t, admin.Free, free.State, "a key never taken")
	assert.Zero(t, free.Token)
	assert.False(t, free.ServerTime.IsZero())

	lk, err := holder.Lock(ctx, "job", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	info, err := adm.Inspect(ctx, "job")
	require.NoError(t, err)
	assert.Equal(t, admin.Held, info.State)
	assert.Equal(t, lk.Token(), info.Token)
	assert.NotEmpty(t, info.Owner)
	assert.Equal(t, 1, info.Count)
	assert.Greater(t, info.Lease, 50*time.Second, "the lease as the database counts it")
	assert.LessOrEqual(t, info.Lease, time.Minute)
	assert.WithinDuration(t, info.ServerTime, info.AcquiredAt, 10*time.Second, "acquired on the database's clock")
	assert.False(t, info.RenewedAt.Before(info.AcquiredAt), "renewed at or after acquired")

	for i := range 5 {
		k, err := holder.Lock(ctx, fmt.Sprint("list-", i), mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		defer func() { _ = k.Release(ctx) }()
	}
	seen := map[string]int{}
	cursor, pages := "", 0
	for {
		page, err := adm.List(ctx, admin.ListOptions{Cursor: cursor, Count: 2, Scans: 1})
		require.NoError(t, err)
		pages++
		for _, l := range page.Locks {
			seen[l.Key]++
			assert.Equal(t, admin.Held, l.State, l.Key)
			assert.Positive(t, l.Lease, "a key shown held has time left")
			assert.Equal(t, page.Locks[0].ServerTime, l.ServerTime, "a page is read at one moment")
		}
		if cursor = page.Cursor; cursor == "" {
			break
		}
		require.Less(t, pages, 10, "the listing ends")
	}
	assert.Greater(t, pages, 2, "pages of two keys")
	for _, k := range []string{"job", "list-0", "list-4"} {
		assert.Equal(t, 1, seen[k], "%s listed once", k)
	}
	_, err = adm.List(ctx, admin.ListOptions{Cursor: "not one of ours"})
	assert.ErrorIs(t, err, mutex.ErrInvalid, "a cursor List did not hand out")

	_, err = adm.ForceRelease(ctx, "job", admin.ForceOptions{Token: lk.Token() + 1, Reason: "wrong token"})
	assert.ErrorIs(t, err, mutex.ErrNotHeld, "held under another token: nothing changes")
	still, err := adm.Inspect(ctx, "job")
	require.NoError(t, err)
	assert.Equal(t, admin.Held, still.State)
	assert.Empty(t, still.Forced)
	res, err := adm.ForceRelease(ctx, "job", admin.ForceOptions{Token: lk.Token(), By: "oncall", Reason: "stuck"})
	require.NoError(t, err)
	assert.Equal(t, 1, res.Released)
	assert.Equal(t, lk.Token(), res.Token)
	assert.Equal(t, lk.Token()+1, res.Floor)
	assert.Equal(t, info.Owner, res.Owner)

	assert.Error(t, lk.Extend(ctx, time.Minute), "the holder's renewal finds its lease gone")
	lost, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	select {
	case <-lk.Context().Done(): // the loss signal
	case <-lost.Done():
		t.Fatal("the holder was never told it lost the lock")
	}
	assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	next, err := op.TryLock(ctx, "job")
	require.NoError(t, err, "the key is free at once")
	assert.Greater(t, next.Token(), res.Floor)
	after, err := adm.Inspect(ctx, "job")
	require.NoError(t, err)
	require.Len(t, after.Forced, 1)
	assert.Equal(t, "oncall", after.Forced[0].By)
	assert.Equal(t, "stuck", after.Forced[0].Reason)
	assert.Equal(t, lk.Token(), after.Forced[0].Token)
	require.NoError(t, next.Release(ctx))
}
