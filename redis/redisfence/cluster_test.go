package redisfence_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/redisfence"
)

// TestCluster: on a 3-master Cluster, keys in the resource's slot work, a
// key outside it is refused before any command, and a write outside it
// that fn queues anyway is refused by Redis with nothing applied.
func TestCluster(t *testing.T) {
	cl := redistest.RedisCluster(t, 3)
	ctx := context.Background()
	addrs := make([]string, len(cl.Masters))
	for i, m := range cl.Masters {
		addrs[i] = m.Addr()
	}
	// A client whose every node counts its dials, commands and pipelines.
	calls := &redistest.Calls{}
	counted := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 addrs,
		ContextTimeoutEnabled: true,
		NewClient: func(opt *redis.Options) *redis.Client {
			c := redis.NewClient(opt)
			c.AddHook(calls)
			return c
		},
	})
	counted.AddHook(calls)
	t.Cleanup(func() { _ = counted.Close() })
	f := newFence(t, counted)

	t.Run("slots as Redis computes them", func(t *testing.T) {
		keys := []string{"", "a", "foo", "bar", "123456789", "{user1000}.following", "{user1000}.followers",
			"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "}{", "{a", "a}", "x{}y", "{{}}",
			"é{ü}", "\x00{\xff}", strings.Repeat("k", 5000), fenceOf("account:42"), fenceOf("a{b}c")}
		for _, k := range keys {
			want, err := cl.Client.ClusterKeySlot(ctx, k).Result()
			require.NoError(t, err)
			assert.Equal(t, int(want), redisfence.Slot(k), "slot of %q", k)
		}
	})

	t.Run("keys in the resource's slot", func(t *testing.T) {
		for _, res := range []string{"account:42", "a{b}c", "{x}", "ü"} {
			bal := "balance:" + redisfence.Tag(res)
			require.NoError(t, counted.Set(ctx, bal, 100, 0).Err())
			err := f.Do(ctx, res, 1, []string{bal, redisfence.Tag(res) + ":other"}, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
				n, err := tx.Get(ctx, bal).Int64()
				if err != nil {
					return err
				}
				pipe.Set(ctx, bal, n-10, 0)
				return nil
			})
			require.NoError(t, err, res)
			n, err := counted.Get(ctx, bal).Int64()
			require.NoError(t, err)
			assert.Equal(t, int64(90), n, res)
		}
	})

	t.Run("a key outside the slot is refused before any command", func(t *testing.T) {
		res := "account:7"
		inside, outside := "balance:"+redisfence.Tag(res), "balance:account:7"
		require.NotEqual(t, redisfence.Slot(inside), redisfence.Slot(outside))
		before := calls.N()
		require.NoError(t, f.Do(ctx, res, 1, []string{inside}, logWrite(res, "in")))
		require.Greater(t, calls.N(), before, "the hook counts this client's commands")

		before = calls.N()
		called := false
		err := f.Do(ctx, res, 2, []string{inside, outside}, func(context.Context, *redis.Tx, redis.Pipeliner) error {
			called = true
			return nil
		})
		require.ErrorIs(t, err, redisfence.ErrInvalid)
		assert.Contains(t, err.Error(), `"balance:account:7"`)
		assert.Contains(t, err.Error(), redisfence.Tag(res))
		assert.Equal(t, before, calls.N(), "a command was sent")
		assert.False(t, called)
		assert.Equal(t, "1", fenceValue(t, counted, res))
	})

	t.Run("a write outside the slot aborts the transaction", func(t *testing.T) {
		res := "account:8"
		outside := "elsewhere:account:8"
		require.NotEqual(t, redisfence.Slot(fenceOf(res)), redisfence.Slot(outside))
		err := f.Do(ctx, res, 1, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			pipe.Set(ctx, outside, "x", 0)
			return logWrite(res, "aborted")(ctx, tx, pipe)
		})
		require.Error(t, err)
		assert.NotErrorIs(t, err, redisfence.ErrInvalid)
		t.Logf("Redis says: %v", err)
		assert.Empty(t, logOf(t, counted, res))
		assert.Empty(t, fenceValue(t, counted, res))
		assert.Zero(t, counted.Exists(ctx, outside).Val())
	})
}

// TestTagNeverCollides: two resources never share a tag, not even a
// resource with a brace and the hex of its SHA-1, whose tag the hashed form
// once was; a tag without braces is still the resource's own.
func TestTagNeverCollides(t *testing.T) {
	resources := []string{"x{y", "a{b}c", "{", "}", "{}", "account:42", "ü", strings.Repeat("k", 100)}
	seen := map[string]string{}
	for _, r := range resources {
		sum := sha1.Sum([]byte(r))
		for _, res := range []string{r, hex.EncodeToString(sum[:]), "{" + hex.EncodeToString(sum[:])} {
			tag := redisfence.Tag(res)
			if other, ok := seen[tag]; ok && other != res {
				t.Errorf("Tag(%q) == Tag(%q) == %q", res, other, tag)
			}
			seen[tag] = res
		}
	}
	assert.Equal(t, "{account:42}", redisfence.Tag("account:42"), "an ordinary tag keeps its form")
	assert.Equal(t, "{{", redisfence.Tag("x{y")[:2], "a hashed tag starts with a brace no ordinary one has")
	assert.Equal(t, redisfence.Slot(redisfence.Tag("x{y")), redisfence.Slot(fenceOf("x{y")), "data key and fence share a slot")
}
