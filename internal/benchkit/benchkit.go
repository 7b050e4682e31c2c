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

// Alternate runs ref's and sub's blocks in turns, which goes first
// alternating too, until each ran b.N cycles (perBlock a block), so that
// both cover the same seconds of a noisy host; it reports sub's ns/op,
// ref's ref-ns/op and their ratio x-ref, and returns the cycles each ran.
func Alternate(b *testing.B, perBlock int, sub, ref func() time.Duration) int {
	var subT, refT time.Duration
	cycles := 0
	for i := 0; cycles < b.N && !b.Failed(); i++ {
		if i%2 == 0 {
			refT += ref()
			subT += sub()
		} else {
			subT += sub()
			refT += ref()
		}
		cycles += perBlock
	}
	b.ReportMetric(float64(subT.Nanoseconds())/float64(cycles), "ns/op")
	b.ReportMetric(float64(refT.Nanoseconds())/float64(cycles), "ref-ns/op")
	b.ReportMetric(float64(subT)/float64(refT), "x-ref")
	return cycles
}
