package redisdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/mutex/backend/redisdriver"
)

// The journal takes each term once, in increasing order, and a
// resignation only while its term is the newest; readers get a term's
// start and resignation folded together.
func TestTermJournal(t *testing.T) {
	for name, mk := range map[string]func(t *testing.T) redis.UniversalClient{
		"standalone": func(t *testing.T) redis.UniversalClient { c, _ := testutil.Redis(t); return c },
		"cluster":    func(t *testing.T) redis.UniversalClient { return testutil.RedisCluster(t, 3).Client },
	} {
		t.Run(name, func(t *testing.T) {
			d, err := redisdriver.New(mk(t), redisdriver.Config{Prefix: "p:"})
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Close() })
			ctx := context.Background()
			const key = "p:election:j"
			at := time.UnixMilli(1_700_000_000_000)

			_, ok, err := d.LastTerm(ctx, key)
			require.NoError(t, err)
			require.False(t, ok)
			for _, tc := range []struct {
				term int64
				want bool
			}{{10, true}, {10, false}, {9, false}, {12, true}} {
				got, err := d.AppendTerm(ctx, key, backend.TermRecord{Term: tc.term, Value: "v", Owner: "o", At: at})
				require.NoError(t, err)
				assert.Equal(t, tc.want, got, "term %d", tc.term)
			}
			ok, err = d.ResignTerm(ctx, key, 10, at)
			require.NoError(t, err)
			assert.False(t, ok, "term 10 is not the newest")
			ok, err = d.ResignTerm(ctx, key, 12, at.Add(time.Second))
			require.NoError(t, err)
			assert.True(t, ok)

			last, ok, err := d.LastTerm(ctx, key)
			require.NoError(t, err)
			require.True(t, ok)
			assert.Equal(t, backend.TermRecord{Term: 12, Value: "v", Owner: "o", At: at, Resigned: true}, last)
			recs, err := d.Terms(ctx, key, 0, 0)
			require.NoError(t, err)
			assert.Equal(t, []backend.TermRecord{
				{Term: 10, Value: "v", Owner: "o", At: at},
				{Term: 12, Value: "v", Owner: "o", At: at, Resigned: true},
			}, recs)
			recs, err = d.Terms(ctx, key, 12, time.Millisecond)
			require.NoError(t, err)
			assert.Empty(t, recs)

			got := make(chan []backend.TermRecord)
			go func() {
				recs, _ := d.Terms(ctx, key, 12, 10*time.Second)
				got <- recs
			}()
			// The blocked read returns the term appended while it waits, or,
			// appended before it blocked, reads it at once.
			_, err = d.AppendTerm(ctx, key, backend.TermRecord{Term: 13, Value: "w", Owner: "o", At: at})
			require.NoError(t, err)
			assert.Equal(t, []backend.TermRecord{{Term: 13, Value: "w", Owner: "o", At: at}}, <-got)
		})
	}
}
