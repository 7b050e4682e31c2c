// Package benchkit holds what the benchmark modules (bench, and the etcd
// module's) report alike, so that their contended figures mean the same.
package benchkit

import (
	"slices"
	"testing"
	"time"
)

// ReportWaits reports a contended run's waits: p50, p99 and p99.9 in ms,
// the busiest goroutine's share of the acquisitions (per holds each
// goroutine's count), round trips per acquisition and acquisitions per
// second. It sorts waits.
func ReportWaits(b *testing.B, waits []time.Duration, per []int, trips int64) {
	n := len(waits)
	if n == 0 {
		return
	}
	slices.Sort(waits)
	q := func(p float64) float64 {
		return float64(waits[min(n-1, int(p*float64(n)))].Microseconds()) / 1000
	}
	b.ReportMetric(q(0.5), "p50-ms")
	b.ReportMetric(q(0.99), "p99-ms")
	b.ReportMetric(q(0.999), "p99.9-ms")
	b.ReportMetric(float64(slices.Max(per))/float64(n), "busiest-share")
	b.ReportMetric(float64(trips)/float64(n), "rtt/acq")
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "acq/s")
	b.ReportMetric(0, "ns/op")
}
