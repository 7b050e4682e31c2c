package httplock_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	httplock "github.com/redfence/redfence/redis/httplock"
)

// A pair is two replicas on one Redis, each with its own Locker, whose
// origin holds its first call until a second request has either begun to
// wait on it (it subscribed to the leader's channel) or called the origin
// itself. So the two requests of send overlap, whatever the middleware
// decides for the second: the test sees that decision, not a race.
type pair struct {
	servers []*httptest.Server
	rdb     *redis.Client
	calls   atomic.Int64
}

func newPair(t *testing.T, handle http.HandlerFunc, opts ...httplock.Option) *pair {
	t.Helper()
	return newPairWith(t, handle, func(h http.Handler) http.Handler { return h }, opts...)
}

// newPairWith is newPair with outer in front of each replica's middleware.
func newPairWith(t *testing.T, handle http.HandlerFunc, outer func(http.Handler) http.Handler, opts ...httplock.Option) *pair {
	t.Helper()
	p := &pair{}
	rdb, srv := redistest.Redis(t)
	p.rdb = rdb
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p.calls.Add(1) == 1 {
			deadline := time.Now().Add(5 * time.Second)
			for p.calls.Load() < 2 && subscribers(rdb) < 1 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond) // poll with a deadline
			}
		}
		handle(w, r)
	})
	p.servers = replicasOn(t, srv, 2, origin, outer, opts...)
	return p
}

// send sends a to the first replica and, once its origin call has begun, b
// to the second; a and b are headers ("Host" is the Host). It returns both
// results.
func (p *pair) send(t *testing.T, c *http.Client, path string, a, b http.Header) (ra, rb result) {
	t.Helper()
	first := make(chan result, 1)
	go func() { first <- get(context.Background(), c, http.MethodGet, p.servers[0].URL+path, a) }()
	require.Eventually(t, func() bool { return p.calls.Load() >= 1 }, 5*time.Second, time.Millisecond)
	rb = get(context.Background(), c, http.MethodGet, p.servers[1].URL+path, b)
	ra = <-first
	require.NoError(t, ra.err)
	require.NoError(t, rb.err)
	return ra, rb
}
