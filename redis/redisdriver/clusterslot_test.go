package redisdriver_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/clusterslot"
	"github.com/redfence/redfence/internal/redistest"
)

// Of agrees with CLUSTER KEYSLOT of a real Cluster, hash tags and their
// odd cases included.
func TestOfAsRedisComputesIt(t *testing.T) {
	cl := redistest.RedisCluster(t, 1)
	ctx := context.Background()
	keys := []string{"", "a", "foo", "bar", "123456789", "{user1000}.following", "{user1000}.followers",
		"foo{}{bar}", "foo{{bar}}zap", "foo{bar}{zap}", "{", "}", "{}", "}{", "{a", "a}", "x{}y", "{{}}",
		"é{ü}", "\x00{\xff}", strings.Repeat("k", 5000), "redfence:{account:42}"}
	for _, k := range keys {
		want, err := cl.Client.ClusterKeySlot(ctx, k).Result()
		require.NoError(t, err)
		assert.Equal(t, int(want), clusterslot.Of(k), "slot of %q", k)
	}
}
