package bench

import (
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/redfence/redfence/mutex"
)

// BenchmarkRenewal holds 1,000 and 10,000 auto-renewed locks on one Locker
// and reports, per renewal tick (TTL/3), the round trips made and the CPU
// time this process spent. One op is one tick.
func BenchmarkRenewal(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run("locks="+strconv.Itoa(n), func(b *testing.B) {
			s := startServers(b)
			l := newLocker(b, s.client(b, s.one))
			b.Cleanup(func() { _ = l.Close() })
			ctx := context.Background()
			const ttl = 900 * time.Millisecond // a tick every 300 ms
			for i := range n {
				if _, err := l.Lock(ctx, "held-"+strconv.Itoa(i), mutex.WithTTL(ttl)); err != nil {
					b.Fatal(err)
				}
			}
			time.Sleep(ttl) // let the acquisitions' renewals spread into ticks
			trips, cpu := s.rtt.n.Load(), cpuTime()
			b.ResetTimer()
			time.Sleep(time.Duration(b.N) * ttl / 3) // b.N ticks of renewal
			b.StopTimer()
			ticks := float64(b.N)
			b.ReportMetric(float64(s.rtt.n.Load()-trips)/ticks, "rtt/tick")
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/1000/ticks, "cpu-ms/tick")
			b.ReportMetric(0, "ns/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
