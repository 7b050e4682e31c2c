package bench

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/examples/stampede/burst"
	"github.com/redfence/redfence/internal/redistest"
	httplock "github.com/redfence/redfence/redis/httplock"
)

// BenchmarkStampede is a burst of 1000 identical GETs over 4 replicas whose
// origin takes 100 ms: no protection, per-replica singleflight, httplock.
// One op is one burst; it reports origin calls and client p50/p99 latency
// (medians over the bursts).
func BenchmarkStampede(b *testing.B) {
	_, srv := redistest.Redis(b)
	for _, mode := range burst.Modes {
		b.Run(string(mode), func(b *testing.B) {
			cfg := burst.Config{Replicas: 4, Requests: 1000, OriginDelay: 100 * time.Millisecond,
				NewClient: func() redis.UniversalClient { return srv.Client() }, HTTPLock: withHTTPLock}
			var calls []float64
			var p50, p99 []time.Duration
			for b.Loop() {
				res, err := burst.Run(context.Background(), mode, cfg)
				if err != nil {
					b.Fatal(err)
				}
				if res.Errors > 0 {
					b.Fatalf("%d failed requests", res.Errors)
				}
				calls = append(calls, float64(res.OriginCalls))
				p50 = append(p50, res.P50)
				p99 = append(p99, res.P99)
			}
			slices.Sort(calls)
			slices.Sort(p50)
			slices.Sort(p99)
			b.ReportMetric(calls[len(calls)/2], "origin-calls")
			b.ReportMetric(float64(p50[len(p50)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(p99[len(p99)/2])/1e6, "p99-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// withHTTPLock is the demo's: httplock with waits long enough for the burst.
func withHTTPLock(rdb redis.UniversalClient, origin http.Handler) (http.Handler, func(), error) {
	locker, err := redistest.NewLocker(rdb)
	if err != nil {
		return nil, nil, err
	}
	mw, err := httplock.New(locker, httplock.WithWait(10*time.Second), httplock.WithTTL(10*time.Second))
	if err != nil {
		_ = locker.Close()
		return nil, nil, err
	}
	return mw(origin), func() { _ = locker.Close() }, nil
}
