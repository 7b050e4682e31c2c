package bench

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// BenchmarkList: what listing the locks costs among many other keys:
// 100,000 keys of which 1,000 are held locks, on one server and on a
// three-master Cluster. A listing is List called page after page with its
// defaults (10 SCANs of COUNT 1000 per call). Reported per listing:
// round trips as List counts them, commands the servers ran (SCAN and
// EVALSHA, from INFO commandstats), and List calls.
func BenchmarkList(b *testing.B) {
	const keys, locks = 100_000, 1_000
	b.Run("standalone", func(b *testing.B) {
		c, _ := redistest.Redis(b)
		rt := &roundTrips{}
		c.AddHook(rt)
		benchList(b, c, []*redis.Client{c}, rt, keys, locks)
	})
	b.Run("cluster-3", func(b *testing.B) {
		cl := redistest.RedisCluster(b, 3)
		var masters []*redis.Client
		err := cl.Client.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
			masters = append(masters, redis.NewClient(&redis.Options{Addr: m.Options().Addr}))
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range masters {
			b.Cleanup(func() { _ = m.Close() })
		}
		benchList(b, cl.Client, masters, nil, keys, locks)
	})
}

func benchList(b *testing.B, c redis.UniversalClient, servers []*redis.Client, rt *roundTrips, keys, locks int) {
	ctx := context.Background()
	l := newLocker(b, c)
	b.Cleanup(func() { _ = l.Close() })
	a, err := admin.New(l)
	if err != nil {
		b.Fatal(err)
	}
	for i := range locks {
		lk, err := l.TryLock(ctx, "job:"+strconv.Itoa(i), mutex.WithTTL(time.Hour), mutex.WithAutoRenew(false))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = lk.Release(context.Background()) })
	}
	for i := 0; i < keys-locks; i += 1000 {
		pipe := c.Pipeline()
		for j := i; j < min(i+1000, keys-locks); j++ {
			pipe.Set(ctx, "data:"+strconv.Itoa(j), "x", time.Hour)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			b.Fatal(err)
		}
	}
	var trips, calls int
	before := serverCmds(b, servers)
	if rt != nil {
		rt.n.Store(0)
	}
	b.ResetTimer()
	for range b.N {
		o := admin.ListOptions{}
		found := 0
		for {
			page, err := a.List(ctx, o)
			if err != nil {
				b.Fatal(err)
			}
			trips += page.RoundTrips
			calls++
			found += len(page.Locks)
			if page.Cursor == "" {
				break
			}
			o.Cursor = page.Cursor
		}
		if found < locks {
			b.Fatalf("found %d of %d locks", found, locks)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(float64(trips)/n, "rtt/listing")
	b.ReportMetric(float64(calls)/n, "calls/listing")
	b.ReportMetric(float64(serverCmds(b, servers)-before)/n, "server-cmds/listing")
	if rt != nil {
		b.ReportMetric(float64(rt.n.Load())/n, "client-rtt/listing")
	}
}

// serverCmds sums the SCAN and EVAL/EVALSHA calls the servers ran.
func serverCmds(b *testing.B, servers []*redis.Client) int {
	total := 0
	for _, s := range servers {
		info, err := s.Info(context.Background(), "commandstats").Result()
		if err != nil {
			b.Fatal(err)
		}
		for _, line := range strings.Split(info, "\n") {
			for _, cmd := range []string{"scan", "evalsha", "eval"} {
				if rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls="); ok {
					v, _ := strconv.Atoi(strings.SplitN(rest, ",", 2)[0])
					total += v
				}
			}
		}
	}
	return total
}

// roundTrips counts what a client sends: a command or a pipeline each.
type roundTrips struct{ n atomic.Int64 }

func (h *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}
