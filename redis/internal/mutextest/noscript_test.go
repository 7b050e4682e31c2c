package mutextest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// A server that lost its scripts (a restart without data loss, SCRIPT
// FLUSH) is met by the pipelined calls too, not only by single ones:
// renewal keeps the lock, a replica acknowledgement is still asked for, and
// Close still releases. Single deployment and Redlock.
func TestScriptsFlushedMidLife(t *testing.T) {
	ctx := context.Background()
	flush := func(t *testing.T, cs ...redis.UniversalClient) {
		t.Helper()
		for _, c := range cs {
			require.NoError(t, c.ScriptFlush(ctx).Err())
		}
	}
	check := func(t *testing.T, l *mutex.Locker, other func() *mutex.Locker, flushAll func()) {
		const ttl = 300 * time.Millisecond
		lk, err := l.Lock(ctx, "flushed", mutex.WithTTL(ttl))
		require.NoError(t, err)
		flushAll()
		// Two renewals (every TTL/3) must go through the reloaded script:
		// the lock outlives its first lease.
		first := lk.Deadline()
		require.Eventually(t, func() bool { return lk.Deadline().After(first.Add(ttl / 2)) }, 10*time.Second, time.Millisecond,
			"no renewal after the scripts were flushed")
		require.NoError(t, lk.Context().Err(), "lost: %v", context.Cause(lk.Context()))

		flushAll()
		require.NoError(t, l.Close(), "Close after the scripts were flushed")
		assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrReleased)
		next, err := other().TryLock(ctx, "flushed")
		require.NoError(t, err, "Close did not release")
		require.NoError(t, next.Release(ctx))
	}
	t.Run("single", func(t *testing.T) {
		c, _ := redistest.Redis(t)
		check(t, mustLocker(t, c), func() *mutex.Locker { return newLocker(t, c) }, func() { flush(t, c) })
	})
	t.Run("redlock", func(t *testing.T) {
		clients, _ := redlockNodes(t, 3)
		l, err := redistest.NewRedlock(clients)
		require.NoError(t, err)
		check(t, l, func() *mutex.Locker { return newRedlock(t, clients) }, func() { flush(t, clients...) })
	})
	t.Run("replica ack", func(t *testing.T) {
		c, _ := redistest.Redis(t)
		l := newLocker(t, c)
		flush(t, c)
		_, err := l.Lock(ctx, "ack", mutex.WithReplicaAck(1, 50*time.Millisecond))
		var ackErr *mutex.ReplicaAckError
		require.ErrorAs(t, err, &ackErr, "WAIT was asked after the script was loaded again")
	})
}
