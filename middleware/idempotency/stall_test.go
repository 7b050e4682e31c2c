package idempotency_test

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/middleware/idempotency"
)

// TestStalledFirstAttemptIsRefused: the first attempt's replica loses Redis
// (a partition: its lock renewals go unanswered) while its handler runs,
// past its lease; a retry on another replica takes the key over and runs
// the handler. When the first attempt's handler then finishes, its result
// is refused by the fence: the retry's is kept, and the first attempt's own
// client is given it too. Whether the retry finished before the late
// result came (retry first) or not (late first), no client ever sees the
// late result.
func TestStalledFirstAttemptIsRefused(t *testing.T) {
	for _, order := range []string{"retry first", "late first"} {
		t.Run(order, func(t *testing.T) {
			srv := testutil.StartRedis(t)
			proxy := testutil.Proxy(t, srv.Addr())
			started, releaseA, releaseB := make(chan struct{}), make(chan struct{}), make(chan struct{})
			h := &charge{}
			var n atomic.Int64
			h.hold = func() {
				switch n.Add(1) {
				case 1:
					close(started)
					<-releaseA
				case 2:
					<-releaseB
				}
			}
			const lease = 200 * time.Millisecond
			a := replicaWith(t, redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true}), h, nil,
				idempotency.WithLease(lease), idempotency.WithRedisTimeout(100*time.Millisecond))
			b := replicaWith(t, srv.Client(), h, nil)
			c := client(t)
			rq := req{tenant: "acme", key: key, body: `{"amount":100}`}

			firstA := make(chan result, 1)
			go func() { firstA <- mustPost(t, c, a.URL, rq) }()
			<-started
			proxy.BlackHole() // a's renewals go unanswered: its lease runs out

			retryB := make(chan result, 1)
			go func() {
				// 409 while a's lock still holds; the retry is accepted once it
				// has run out.
				for {
					res := post(t.Context(), c, b.URL, rq)
					if res.err != nil || res.status != http.StatusConflict {
						retryB <- res
						return
					}
				}
			}()
			waitFor(t, "the retry's handler", func() bool { return h.calls.Load() == 2 })
			var fromB result
			if order == "retry first" {
				close(releaseB)
				fromB = <-retryB
			}
			proxy.Cut() // what the partition held is lost, as its calls timed out
			proxy.Heal()
			close(releaseA)
			fromA := <-firstA
			if order == "late first" {
				assert.Equal(t, http.StatusConflict, fromA.status, "the retry still runs: %s", fromA.body)
				close(releaseB)
				fromB = <-retryB
			}
			require.NoError(t, fromB.err)
			assert.Equal(t, http.StatusCreated, fromB.status)
			assert.Contains(t, fromB.body, `"charge":2`)
			if order == "retry first" {
				assert.Equal(t, fromB.body, fromA.body, "the late attempt's client gets the kept result")
				assert.True(t, fromA.replayed())
			}
			for _, rep := range []replica{a, b} {
				later := mustPost(t, c, rep.URL, rq)
				assert.Equal(t, fromB.body, later.body, "the retry's result is kept")
			}
			assert.EqualValues(t, 2, h.calls.Load())
		})
	}
}

// TestSlowHandlerKeepsItsKey: a handler that runs for several leases keeps
// its lock (renewed every third of the lease): every retry meanwhile, on
// another replica, gets 409 until the first one's response is stored, and
// then its replay; the handler runs once. The handler's length is the
// scenario (slower than its lease), not a synchronisation.
func TestSlowHandlerKeepsItsKey(t *testing.T) {
	_, srv := testutil.Redis(t)
	const lease = 100 * time.Millisecond
	h := &charge{}
	h.hold = func() {
		if h.calls.Load() == 1 {
			time.Sleep(6 * lease)
		}
	}
	reps := replicasOn(t, srv, 2, h, nil, idempotency.WithLease(lease))
	c := client(t)
	rq := req{tenant: "acme", key: key, body: "{}"}
	first := make(chan result, 1)
	start := time.Now()
	go func() { first <- mustPost(t, c, reps[0].URL, rq) }()
	waitFor(t, "the handler", func() bool { return h.calls.Load() == 1 })
	retries := 0
	for {
		res := mustPost(t, c, reps[1].URL, rq)
		if res.status == http.StatusConflict {
			retries++
			continue
		}
		assert.True(t, res.replayed(), "retry %d, %v after the first: %s", retries, time.Since(start), res.body)
		assert.Contains(t, res.body, `"charge":1`)
		break
	}
	assert.Equal(t, http.StatusCreated, (<-first).status)
	assert.GreaterOrEqual(t, time.Since(start), 6*lease, "the retries spanned the slow handler")
	assert.EqualValues(t, 1, h.calls.Load())
}
