package mutextest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redfence/redfence/redis/internal/redisproto"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// WithReplicaAck: with too few replicas the acquisition fails with a
// *ReplicaAckError and ErrNotAcquired and the lock is released; with a
// replica online the lock is acquired and the replica holds it.
func TestReplicaAck(t *testing.T) {
	c, primary := redistest.Redis(t)
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

	replica := redistest.StartRedis(t, redistest.WithRedisArgs("--replicaof", "127.0.0.1", fmt.Sprint(primary.Port())))
	rc := replica.Client()
	defer rc.Close()
	require.Eventually(t, func() bool {
		info, _ := c.Info(ctx, "replication").Result()
		return strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online")
	}, 10*time.Second, 20*time.Millisecond)
	lk, err = l.Lock(ctx, "ack", mutex.WithReplicaAck(1, 2*time.Second))
	require.NoError(t, err)
	v, err := rc.Get(ctx, redisproto.LockKey(redisproto.DefaultPrefix, "ack")).Result()
	require.NoError(t, err, "the replica has the lock")
	assert.Contains(t, v, strconv.FormatInt(lk.Token(), 10))
	require.NoError(t, lk.Release(ctx))
}
