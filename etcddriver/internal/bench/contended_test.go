package bench

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/benchkit"
	"github.com/redfence/redfence/internal/etcdtest"
)

// BenchmarkEtcdContended has g goroutines take one key in turn on one
// embedded etcd member: redfence through one Locker (one client) and
// through four (a client each, as four processes would), concurrency.Mutex
// with a session per goroutine (one session's Mutexes share a key) on one
// client. It reports the wait from Lock's call to its return (p50, p99,
// p99.9), the busiest goroutine's share of the acquisitions, requests sent
// per acquisition (rtt/acq) and acquisitions per second.
func BenchmarkEtcdContended(b *testing.B) {
	srv := etcdtest.Start(b)
	var run atomic.Int64 // a key per run: no run inherits another's waiters
	for _, g := range []int{32} {
		for _, name := range []string{"redfence-1", "redfence-4", "mutex"} {
			b.Run("g="+strconv.Itoa(g)+"/"+name, func(b *testing.B) {
				c := &rtt{}
				var subs []subject
				switch name {
				case "redfence-1":
					subs = []subject{redfenceSubject(b, client(b, srv, c), c)}
				case "redfence-4":
					for range 4 {
						subs = append(subs, redfenceSubject(b, client(b, srv, c), c))
					}
				case "mutex":
					cli := client(b, srv, c)
					for range g {
						subs = append(subs, mutexSubject(session(b, cli), c))
					}
				}
				contend(b, g, subs, c, "hot-"+strconv.FormatInt(run.Add(1), 10))
			})
		}
	}
}

// contend runs b.N acquisitions of key over g goroutines (goroutine i
// through subs[i%len(subs)]) and reports them.
func contend(b *testing.B, g int, subs []subject, c *rtt, key string) {
	ctx := context.Background()
	var (
		mu    sync.Mutex
		waits []time.Duration
		per   = make([]int, g)
		left  atomic.Int64
	)
	left.Store(int64(b.N))
	before := c.n.Load()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range g {
		sub := subs[i%len(subs)]
		wg.Go(func() {
			var mine []time.Duration
			for left.Add(-1) >= 0 {
				start := time.Now()
				unlock, err := sub.lock(ctx, key)
				if err != nil {
					b.Error(sub.name, err)
					return
				}
				mine = append(mine, time.Since(start))
				per[i]++
				if err := unlock(); err != nil {
					b.Error(sub.name, err)
					return
				}
			}
			mu.Lock()
			waits = append(waits, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	b.StopTimer()
	benchkit.ReportWaits(b, waits, per, c.n.Load()-before)
}
