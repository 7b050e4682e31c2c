package idempotency_test

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/redis/idempotency"
)

// TestSupersededGetsNoLateHeaders: a first attempt that stalled past
// its lease has its result refused, and its client is given what the record
// holds (the retry's response, or 409). The refused handler wrote its
// headers into the real ResponseWriter's map (capture.Header is w.Header),
// through which superseded answers too; none of them (its charge id, its
// Content-Length, a secret) may go out with the retry's replay or the 409
// problem: no client sees the late result, headers included.
func TestSupersededGetsNoLateHeaders(t *testing.T) {
	for _, order := range []string{"retry first", "late first"} {
		t.Run(order, func(t *testing.T) {
			srv := redistest.StartRedis(t)
			proxy := testutil.Proxy(t, srv.Addr())
			started, releaseA, releaseB := make(chan struct{}), make(chan struct{}), make(chan struct{})
			var n atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.ReadAll(r.Body)
				i := n.Add(1)
				body := fmt.Sprintf(`{"charge":%d}`, i)
				switch i {
				case 1:
					close(started)
					<-releaseA
					body = `{"charge":1,"padding":"the late attempt's longer body"}`
					w.Header().Set("X-Late-Secret", "refused-attempt")
					w.Header().Set("Content-Length", strconv.Itoa(len(body)))
				case 2:
					<-releaseB
				}
				w.WriteHeader(http.StatusCreated)
				_, _ = io.WriteString(w, body)
			})
			const lease = 200 * time.Millisecond
			a := replicaWith(t, redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true}), h, nil,
				idempotency.WithTTL(lease), idempotency.WithStoreTimeout(100*time.Millisecond))
			b := replicaWith(t, srv.Client(), h, nil)
			c := client(t)
			rq := req{tenant: "acme", key: key, body: `{"amount":100}`}

			firstA := make(chan result, 1)
			go func() { firstA <- post(t.Context(), c, a.URL, rq) }()
			<-started
			proxy.BlackHole()
			retryB := make(chan result, 1)
			go func() {
				for {
					res := post(t.Context(), c, b.URL, rq)
					if res.err != nil || res.status != http.StatusConflict {
						retryB <- res
						return
					}
				}
			}()
			waitFor(t, "the retry's handler", func() bool { return n.Load() == 2 })
			var fromB result
			if order == "retry first" {
				close(releaseB)
				fromB = <-retryB
			}
			proxy.Cut()
			proxy.Heal()
			close(releaseA)
			fromA := <-firstA
			if order == "late first" {
				close(releaseB)
				fromB = <-retryB
			}
			require.NoError(t, fromB.err)
			require.NoError(t, fromA.err, "the late attempt's client gets a readable answer (its Content-Length was the refused body's)")
			assert.Empty(t, fromA.header.Get("X-Late-Secret"), "a header of the refused result reached a client")
			if order == "retry first" {
				assert.Equal(t, fromB.body, fromA.body)
				assert.Equal(t, fromB.header.Get("Content-Length"), fromA.header.Get("Content-Length"))
			} else {
				assert.Equal(t, http.StatusConflict, fromA.status)
				assert.Equal(t, idempotency.ProblemInProgress, problemType(t, fromA))
			}
		})
	}
}
