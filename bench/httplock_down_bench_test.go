package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redistest"
	httplock "github.com/redfence/redfence/redis/httplock"
)

// BenchmarkHTTPLockRedisDown is what httplock adds to a request while its
// Redis is down, through a go-redis client with default options: Redis
// stopped, or paused (SIGSTOP: connections stay open, nothing answers).
//
// One op is one outage: Redis fails; a first request finds out (reported
// apart, first-ms); then 20 sequential requests through httplock, each
// paired with one to the bare origin (the same handler, no middleware, in
// alternating order); then Redis comes back and the op ends once the
// middleware has noticed. It reports, over every op's 20 pairs, the p50 and
// p95 of the added latency (the request through httplock minus its bare
// partner) and of the bare latency itself, and the median first request.
func BenchmarkHTTPLockRedisDown(b *testing.B) {
	for _, state := range []struct {
		name       string
		fail, heal func(*redistest.RedisServer)
	}{
		{"stopped", (*redistest.RedisServer).Kill, (*redistest.RedisServer).Restart},
		{"paused", (*redistest.RedisServer).Pause, (*redistest.RedisServer).Resume},
	} {
		b.Run(state.name, func(b *testing.B) {
			srv := redistest.StartRedis(b)
			rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // go-redis's defaults
			stores := &setCounter{}
			rdb.AddHook(stores)
			l := newLocker(b, rdb)
			mw, err := httplock.New(l)
			if err != nil {
				b.Fatal(err)
			}
			origin := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "page") })
			bare := httptest.NewServer(origin)
			wrapped := httptest.NewServer(mw(origin))
			tr := &http.Transport{}
			c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
			b.Cleanup(func() {
				tr.CloseIdleConnections()
				bare.Close()
				wrapped.Close()
				_ = l.Close()
				_ = rdb.Close()
			})
			fetch := func(url string) (time.Duration, string) {
				t0 := time.Now()
				resp, err := c.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK {
					b.Fatalf("status %d, %v", resp.StatusCode, err)
				}
				return time.Since(t0), resp.Header.Get(httplock.DefaultRoleHeader)
			}
			// Warm up as a running service would be: connections open.
			fetch(bare.URL + "/warm")
			fetch(wrapped.URL + "/warm")

			var added, plain, first []time.Duration
			op := 0
			for b.Loop() {
				op++
				state.fail(srv)
				d, role := fetch(fmt.Sprintf("%s/first/%d", wrapped.URL, op))
				if role != httplock.RoleLeader {
					b.Fatalf("first request with Redis %s: role %q", state.name, role)
				}
				first = append(first, d)
				for i := range 20 {
					path := fmt.Sprintf("/down/%d/%d", op, i)
					var db, dw time.Duration
					if i%2 == 0 {
						db, _ = fetch(bare.URL + path)
						dw, role = fetch(wrapped.URL + path)
					} else {
						dw, role = fetch(wrapped.URL + path)
						db, _ = fetch(bare.URL + path)
					}
					if role != httplock.RoleLeader {
						b.Fatalf("request %d with Redis %s: role %q", i, state.name, role)
					}
					added = append(added, dw-db)
					plain = append(plain, db)
				}
				state.heal(srv)
				// Requests let the probe start; the op ends when one stores its
				// response in Redis again.
				deadline := time.Now().Add(30 * time.Second)
				for n := 0; ; n++ {
					before := stores.n.Load()
					if fetch(fmt.Sprintf("%s/back/%d/%d", wrapped.URL, op, n)); stores.n.Load() > before {
						break
					}
					if time.Now().After(deadline) {
						b.Fatal("Redis back, but httplock did not notice")
					}
					time.Sleep(20 * time.Millisecond)
				}
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			pct := func(ds []time.Duration, p int) time.Duration {
				ds = slices.Clone(ds)
				slices.Sort(ds)
				return ds[min(len(ds)-1, len(ds)*p/100)]
			}
			b.ReportMetric(ms(pct(added, 50)), "added-p50-ms")
			b.ReportMetric(ms(pct(added, 95)), "added-p95-ms")
			b.ReportMetric(ms(pct(plain, 50)), "bare-p50-ms")
			b.ReportMetric(ms(pct(plain, 95)), "bare-p95-ms")
			b.ReportMetric(ms(pct(first, 50)), "first-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// setCounter counts the SET commands a client sends: shared responses stored.
type setCounter struct{ n atomic.Int64 }

func (h *setCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *setCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "set" {
			h.n.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *setCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
