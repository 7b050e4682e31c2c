package redisdriver_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/journaltest"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/redisdriver"
)

// The journal keeps its contract (journaltest) on standalone and Cluster.
func TestTermJournal(t *testing.T) {
	for name, mk := range map[string]func(t *testing.T) redis.UniversalClient{
		"standalone": func(t *testing.T) redis.UniversalClient { c, _ := redistest.Redis(t); return c },
		"cluster":    func(t *testing.T) redis.UniversalClient { return redistest.RedisCluster(t, 3).Client },
	} {
		t.Run(name, func(t *testing.T) {
			d, err := redisdriver.New(mk(t), redisdriver.WithPrefix("p:"))
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close() })
			journaltest.Run(context.Background(), t, d, "election:j")
		})
	}
}
