package redlockdriver_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// TestLateNodeSettledThenReleased: a slow node still answering when the
// two fast ones made the quorum grants late, with a token of its own (its
// counter ran ahead); the settlement lowers it to the chosen token, and a
// Release sent before that frees the slow node once it carries it. A retry
// of the Release goes to the fast nodes only.
func TestLateNodeSettledThenReleased(t *testing.T) {
	_, srvs := redistest.RedisN(t, 3)
	slow := testutil.Proxy(t, srvs[2].Addr())
	slow.SetLatency(100 * time.Millisecond)
	clients := []redis.UniversalClient{client(t, srvs[0].Addr()), client(t, srvs[1].Addr()), client(t, slow.Addr())}
	d := newDriver(t, clients, redlockdriver.WithStoreTimeout(5*time.Second))
	ctx := context.Background()
	key := "late"
	ahead := time.Now().Add(time.Hour).UnixMicro()
	direct := srvs[2].Client()
	t.Cleanup(func() { _ = direct.Close() })
	require.NoError(t, direct.Set(ctx, redisproto.LockKey(prefix, "late"), fmt.Sprint(ahead), time.Hour).Err())

	l := acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: 10 * time.Second})
	require.Less(t, l.Token, ahead, "the fast nodes decided")
	require.Equal(t, []int{2}, redlockdriver.LateNodes(l.Handle))
	left, err := d.Release(ctx, l)
	require.NoError(t, err)
	assert.Zero(t, left)
	select {
	case <-redlockdriver.Settled(l.Handle):
		t.Fatal("settled before the slow node answered: the test proves nothing")
	default:
	}

	chosen := strconv.FormatInt(l.Token, 10)
	waitFor(t, "the slow node released under the chosen token", func() bool {
		return value(t, direct, key) == chosen
	})
	for _, c := range clients[:2] {
		assert.Equal(t, chosen, value(t, c, key))
	}
	left, err = d.Release(ctx, l)
	require.NoError(t, err)
	assert.Equal(t, int64(-1), left, "the retry finds the fast nodes released")
}
