package idempotency_test

import (
	"net/http"
	"sync"
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

// stall is a first attempt stalled past its lease: its replica, a, reaches
// Redis through proxy, black-holed (a partition: its lock renewals go
// unanswered) while a's handler runs; a retry on replica b, which reaches
// Redis directly, has taken the key over and its handler runs. Each
// handler waits for its release.
type stall struct {
	srv                *redistest.RedisServer
	proxy              *testutil.TCPProxy
	h                  *charge
	a, b               replica
	c                  *http.Client
	rq                 req
	releaseA, releaseB func()      // let a's and b's handler end
	firstA, retryB     chan result // the clients' answers
}

// stalled sets the stall up; rdbA, given the server and the proxy's
// address, is a's client.
func stalled(t *testing.T, rdbA func(srv *redistest.RedisServer, addr string) *redis.Client) *stall {
	t.Helper()
	s := &stall{srv: redistest.StartRedis(t), h: &charge{}, c: client(t),
		rq:     req{tenant: "acme", key: key, body: `{"amount":100}`},
		firstA: make(chan result, 1), retryB: make(chan result, 1)}
	s.proxy = testutil.Proxy(t, s.srv.Addr())
	started, endA, endB := make(chan struct{}), make(chan struct{}), make(chan struct{})
	s.releaseA = sync.OnceFunc(func() { close(endA) })
	s.releaseB = sync.OnceFunc(func() { close(endB) })
	var n atomic.Int64
	s.h.hold = func() {
		switch n.Add(1) {
		case 1:
			close(started)
			<-endA
		case 2:
			<-endB
		}
	}
	const lease = 200 * time.Millisecond
	s.a = replicaWith(t, rdbA(s.srv, s.proxy.Addr()), s.h, nil,
		idempotency.WithTTL(lease), idempotency.WithStoreTimeout(100*time.Millisecond))
	s.b = replicaWith(t, s.srv.Client(), s.h, nil)
	t.Cleanup(func() { s.releaseA(); s.releaseB() }) // before the servers close, on a failure too
	go func() { s.firstA <- mustPost(t, s.c, s.a.URL, s.rq) }()
	<-started
	s.proxy.BlackHole() // a's renewals go unanswered: its lease runs out
	go func() {
		// 409 while a's lock still holds; the retry is accepted once it has
		// run out.
		for {
			res := post(t.Context(), s.c, s.b.URL, s.rq)
			if res.err != nil || res.status != http.StatusConflict {
				s.retryB <- res
				return
			}
		}
	}()
	waitFor(t, "the retry's handler", func() bool { return s.h.calls.Load() == 2 })
	return s
}

func proxied(_ *redistest.RedisServer, addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
}

// retryEnds releases the retry's handler and returns its client's answer,
// its result.
func (s *stall) retryEnds(t *testing.T) result {
	t.Helper()
	s.releaseB()
	fromB := <-s.retryB
	require.NoError(t, fromB.err)
	assert.Equal(t, http.StatusCreated, fromB.status)
	assert.Contains(t, fromB.body, `"charge":2`)
	return fromB
}

// kept checks, once both replicas reach Redis, that the retry's result,
// fromB, is the one kept, and that only the two attempts ran.
func (s *stall) kept(t *testing.T, fromB result) {
	t.Helper()
	for _, rep := range []replica{s.a, s.b} {
		later := mustPost(t, s.c, rep.URL, s.rq)
		assert.Equal(t, fromB.body, later.body, "the retry's result is kept")
	}
	assert.EqualValues(t, 2, s.h.calls.Load())
}

// TestStalledFirstAttemptIsRefused: when the stalled first attempt's
// handler finishes, Redis reachable again, its result is refused by the
// fence: the retry's is kept, and the first attempt's own client is given
// it too. Whether the retry finished before the late result came (retry
// first) or not (late first), no client ever sees the late result.
func TestStalledFirstAttemptIsRefused(t *testing.T) {
	for _, order := range []string{"retry first", "late first"} {
		t.Run(order, func(t *testing.T) {
			s := stalled(t, proxied)
			var fromB result
			if order == "retry first" {
				fromB = s.retryEnds(t)
			}
			s.proxy.Cut() // what the partition held is lost, as its calls timed out
			s.proxy.Heal()
			s.releaseA()
			fromA := <-s.firstA
			// 503 when a's reads of the record fail too (its pooled
			// connections may still be the cut ones): never the late result.
			assert.NotContains(t, fromA.body, `"charge":1`, "the late result reached its client")
			if order == "late first" {
				assert.Contains(t, []int{http.StatusConflict, http.StatusServiceUnavailable}, fromA.status, "the retry still runs: %s", fromA.body)
				fromB = s.retryEnds(t)
			} else if fromA.status != http.StatusServiceUnavailable {
				assert.Equal(t, fromB.body, fromA.body, "the late attempt's client gets the kept result")
				assert.True(t, fromA.replayed())
			}
			s.kept(t, fromB)
		})
	}
}

// TestStalledFirstAttemptsWriteFails: the stalled first attempt's handler
// finishes and its write fails, so whether it was applied is unknown to it,
// and its lock is lost: its result is never sent, for the retry's is the
// one kept. Its client is given what the record holds when a can read it
// (its WATCH refused by an ACL while its GET is allowed: a write whose
// reply was lost), else 503 (a still partitioned).
func TestStalledFirstAttemptsWriteFails(t *testing.T) {
	for _, order := range []string{"retry first", "late first"} {
		t.Run("record readable/"+order, func(t *testing.T) {
			const user = "replica-a"
			s := stalled(t, func(srv *redistest.RedisServer, addr string) *redis.Client {
				require.NoError(t, srv.Client().Do(t.Context(), "ACL", "SETUSER", user, "on", ">pw", "~*", "&*", "+@all").Err())
				return redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, Username: user, Password: "pw"})
			})
			var fromB result
			if order == "retry first" {
				fromB = s.retryEnds(t)
			}
			require.NoError(t, s.srv.Client().Do(t.Context(), "ACL", "SETUSER", user, "-watch").Err())
			s.proxy.Cut()
			s.proxy.Heal()
			s.releaseA()
			fromA := <-s.firstA
			if order == "late first" {
				assert.Equal(t, http.StatusConflict, fromA.status, "the retry still runs: %s", fromA.body)
				assert.Equal(t, idempotency.ProblemInProgress, problemType(t, fromA))
				fromB = s.retryEnds(t)
			} else {
				assert.Equal(t, fromB.body, fromA.body, "the late attempt's client gets the kept result")
				assert.True(t, fromA.replayed())
			}
			require.NoError(t, s.srv.Client().Do(t.Context(), "ACL", "SETUSER", user, "+watch").Err())
			s.kept(t, fromB)
		})
	}
	t.Run("partitioned", func(t *testing.T) {
		s := stalled(t, proxied)
		s.releaseA()
		fromA := <-s.firstA
		assert.Equal(t, http.StatusServiceUnavailable, fromA.status, fromA.body)
		assert.Equal(t, idempotency.ProblemUnavailable, problemType(t, fromA))
		assert.Equal(t, "1", fromA.header.Get("Retry-After"))
		s.proxy.Heal()
		s.kept(t, s.retryEnds(t))
	})
}

// TestSlowHandlerKeepsItsKey: a handler that runs for several leases keeps
// its lock (renewed every third of the lease): every retry meanwhile, on
// another replica, gets 409 until the first one's response is stored, and
// then its replay; the handler runs once. The handler's length is the
// scenario (slower than its lease), not a synchronisation.
func TestSlowHandlerKeepsItsKey(t *testing.T) {
	_, srv := redistest.Redis(t)
	const lease = 100 * time.Millisecond
	h := &charge{}
	h.hold = func() {
		if h.calls.Load() == 1 {
			time.Sleep(6 * lease)
		}
	}
	reps := replicasOn(t, srv, 2, h, nil, idempotency.WithTTL(lease))
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
