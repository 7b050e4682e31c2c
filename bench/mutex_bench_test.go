package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// The raw floor: what any Redis lock must at least do, SET NX PX to take and a
// compare-and-delete script to release, with nothing else.
var floorRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

func token() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func floorCycle(ctx context.Context, b *testing.B, c *redis.Client, key string) {
	tok := token()
	ok, err := c.SetNX(ctx, key, tok, 10*time.Second).Result()
	if err != nil || !ok {
		b.Fatalf("floor acquire: %v %v", ok, err)
	}
	if err := floorRelease.Run(ctx, c, []string{key}, tok).Err(); err != nil {
		b.Fatal(err)
	}
}

func redfenceCycle(ctx context.Context, b *testing.B, l *mutex.Locker, key string) {
	lk, err := l.Lock(ctx, key)
	if err != nil {
		b.Fatal(err)
	}
	if err := lk.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkUncontended is one Lock+Unlock cycle with nobody else around, next
// to the floor, sequential and with GOMAXPROCS goroutines on distinct keys.
func BenchmarkUncontended(b *testing.B) {
	c, _ := testutil.Redis(b)
	ctx := context.Background()
	l := mutex.New(c)
	b.Cleanup(func() { _ = l.Close() })

	b.Run("seq/floor", func(b *testing.B) {
		for b.Loop() {
			floorCycle(ctx, b, c, "floor")
		}
	})
	b.Run("seq/redfence", func(b *testing.B) {
		for b.Loop() {
			redfenceCycle(ctx, b, l, "redfence")
		}
	})
	var n atomic.Int64
	b.Run("parallel/floor", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			key := "pfloor-" + strconv.FormatInt(n.Add(1), 10)
			for pb.Next() {
				floorCycle(ctx, b, c, key)
			}
		})
	})
	b.Run("parallel/redfence", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			key := "pred-" + strconv.FormatInt(n.Add(1), 10)
			for pb.Next() {
				redfenceCycle(ctx, b, l, key)
			}
		})
	})
}

var statRe = regexp.MustCompile(`cmdstat_([a-z|]+):calls=(\d+)`)

func commandCalls(ctx context.Context, c *redis.Client) int64 {
	info, _ := c.Info(ctx, "commandstats").Result()
	var n int64
	for _, m := range statRe.FindAllStringSubmatch(info, -1) {
		if m[1] == "info" || m[1] == "ping" {
			continue
		}
		v, _ := strconv.ParseInt(m[2], 10, 64)
		n += v
	}
	return n
}

// BenchmarkContended32 has 32 goroutines take one key in turn, through one
// Locker and spread over 4 Lockers (as 4 processes would), and reports the
// wait distribution, the busiest goroutine's share and Redis commands per
// acquisition (every command, script-internal calls not counted).
func BenchmarkContended32(b *testing.B) {
	for _, lockers := range []int{1, 4} {
		b.Run("lockers="+strconv.Itoa(lockers), func(b *testing.B) {
			c, _ := testutil.Redis(b)
			ctx := context.Background()
			ls := make([]*mutex.Locker, lockers)
			for i := range ls {
				ls[i] = mutex.New(c)
			}
			b.Cleanup(func() {
				for _, l := range ls {
					_ = l.Close()
				}
			})
			const goroutines = 32
			var (
				mu    sync.Mutex
				waits []time.Duration
				per   [goroutines]int
				left  atomic.Int64
			)
			left.Store(int64(b.N))
			before := commandCalls(ctx, c)
			b.ResetTimer()
			var wg sync.WaitGroup
			for g := range goroutines {
				l := ls[g%lockers]
				wg.Go(func() {
					var mine []time.Duration
					for left.Add(-1) >= 0 {
						start := time.Now()
						lk, err := l.Lock(ctx, "hot")
						if err != nil {
							b.Error(err)
							return
						}
						mine = append(mine, time.Since(start))
						per[g]++
						_ = lk.Unlock(ctx)
					}
					mu.Lock()
					waits = append(waits, mine...)
					mu.Unlock()
				})
			}
			wg.Wait()
			b.StopTimer()
			cmds := commandCalls(ctx, c) - before
			slices.Sort(waits)
			q := func(p float64) float64 {
				return float64(waits[min(len(waits)-1, int(p*float64(len(waits))))].Microseconds()) / 1000
			}
			b.ReportMetric(q(0.5), "p50-ms")
			b.ReportMetric(q(0.99), "p99-ms")
			b.ReportMetric(q(0.999), "p99.9-ms")
			b.ReportMetric(float64(slices.Max(per[:]))/float64(len(waits)), "busiest-share")
			b.ReportMetric(float64(cmds)/float64(len(waits)), "cmds/acq")
			b.ReportMetric(float64(len(waits))/b.Elapsed().Seconds(), "acq/s")
		})
	}
}
