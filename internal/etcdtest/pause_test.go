package etcdtest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A paused member takes no part in the cluster until Resume: the others
// elect a leader without it, it never hears of that leader, a client of it
// gets no answer while the others' clients write, and once resumed it
// answers with the writes made meanwhile.
func TestPausedLeaderIsIsolated(t *testing.T) {
	c := StartCluster(t, 3)
	old := c.Leader(t)
	var rest []*Member
	for _, m := range c.Members {
		if m != old {
			rest = append(rest, m)
		}
	}
	paused, other := old.Client(t), rest[0].Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	old.Pause()
	t.Cleanup(old.Resume)
	var lead uint64
	require.Eventually(t, func() bool {
		a, b := uint64(rest[0].etcd().Server.Leader()), uint64(rest[1].etcd().Server.Leader())
		lead = a
		return a != 0 && a == b && a != uint64(old.id())
	}, readyWithin, leaderPoll, "the others elect a leader among themselves")
	_, err := other.Put(ctx, "k", "while paused")
	require.NoError(t, err)
	assert.NotEqual(t, lead, uint64(old.etcd().Server.Leader()), "the paused member heard from the new leader")

	// Serializable: the member would answer from its own state, without
	// asking the others, if a request reached it.
	short, cancelShort := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = paused.Get(short, "k", clientv3.WithSerializable())
	cancelShort()
	require.ErrorIs(t, err, context.DeadlineExceeded, "the paused member answered")

	old.Resume()
	got, err := paused.Get(ctx, "k")
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	assert.Equal(t, "while paused", string(got.Kvs[0].Value))
}
