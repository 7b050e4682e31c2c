package bench

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redfence/redfence/internal/benchkit"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/idempotency"
)

// BenchmarkIdempotencyPaired is what the idempotency middleware adds to a
// POST, end to end over loopback HTTP (client, http.Server, handler, one
// private redis-server): the same handler behind the middleware against
// it bare, in alternating blocks of pairBlock requests (benchkit.Alternate).
//
//	seq/first-vs-bare   every request a new key: the handler runs (the open script,
//	                    TryLock, the fenced claim and outcome, unlock)
//	seq/replay-vs-bare  one key, stored before the timing: the stored response
//	                    replayed (one script: GET, else SET)
//
// It reports ns/op (through the middleware), ref-ns/op (bare), x-ref and
// added-us (their difference, in µs per request).
func BenchmarkIdempotencyPaired(b *testing.B) {
	rdb, _ := redistest.Redis(b)
	l := newLocker(b, rdb)
	b.Cleanup(func() { _ = l.Close() })
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"charge":"ch_1","request":%s}`, body)
	})
	scope := func(r *http.Request) string { return r.Header.Get("X-Customer") }
	mw, err := idempotency.New(l, scope)
	if err != nil {
		b.Fatal(err)
	}
	bare, guarded := httptest.NewServer(pay), httptest.NewServer(mw(pay))
	b.Cleanup(bare.Close)
	b.Cleanup(guarded.Close)
	tr := &http.Transport{MaxIdleConnsPerHost: 4}
	b.Cleanup(tr.CloseIdleConnections)
	c := &http.Client{Transport: tr}

	n := 0
	keys := map[string]func() string{
		"first":  func() string { n++; return fmt.Sprintf(`"first-%d-%d"`, time.Now().UnixNano(), n) },
		"replay": func() string { return `"replayed"` },
	}
	for _, sub := range []string{"first", "replay"} {
		b.Run("seq/"+sub+"-vs-bare", func(b *testing.B) {
			key := keys[sub]
			var subT, refT time.Duration
			block := func(url string, total *time.Duration) func() time.Duration {
				return func() time.Duration {
					start := time.Now()
					for range pairBlock {
						postOnce(b, c, url, key())
					}
					d := time.Since(start)
					*total += d
					return d
				}
			}
			postOnce(b, c, guarded.URL, key()) // the replayed key is stored
			cycles := benchkit.Alternate(b, pairBlock, block(guarded.URL, &subT), block(bare.URL, &refT))
			b.ReportMetric(float64((subT-refT).Nanoseconds())/float64(cycles)/1e3, "added-us")
		})
	}
}

// postOnce sends one payment and fails the benchmark on anything but 201.
func postOnce(b *testing.B, c *http.Client, url, key string) {
	req, err := http.NewRequest(http.MethodPost, url+"/payments", strings.NewReader(`{"amount":100}`))
	if err != nil {
		b.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Customer", "cus_42")
	req.Header.Set(idempotency.HeaderName, key)
	resp, err := c.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b.Fatalf("status %d", resp.StatusCode)
	}
}
