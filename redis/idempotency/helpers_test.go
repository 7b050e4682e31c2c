package idempotency_test

import (
	"context"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/idempotency"
)

// scopeHeader carries the tenant in these tests, as an authenticating
// middleware would have put it in the request (a principal from a token).
const scopeHeader = "X-Test-Tenant"

func tenant(r *http.Request) string { return r.Header.Get(scopeHeader) }

// replica is one http.Server of a service: its own Locker and client, over
// the Redis all replicas share.
type replica struct {
	*httptest.Server
	handler http.Handler // the middleware, for WaitCalls
}

// replicasOn starts n replicas of handle on srv, each through outer (nil:
// none) around the middleware.
func replicasOn(t *testing.T, srv *redistest.RedisServer, n int, handle http.Handler, outer func(http.Handler) http.Handler, opts ...idempotency.Option) []replica {
	t.Helper()
	out := make([]replica, n)
	for i := range out {
		out[i] = replicaWith(t, srv.Client(), handle, outer, opts...)
	}
	return out
}

// replicaWith starts one replica whose Locker uses rdb; it closes rdb at
// Cleanup.
func replicaWith(t *testing.T, rdb *redis.Client, handle http.Handler, outer func(http.Handler) http.Handler, opts ...idempotency.Option) replica {
	t.Helper()
	l, err := redistest.NewLocker(rdb)
	require.NoError(t, err)
	h := handlerOf(t, handle, l, opts...)
	var top http.Handler = h
	if outer != nil {
		top = outer(h)
	}
	s := httptest.NewUnstartedServer(top)
	s.Config.ErrorLog = log.New(io.Discard, "", 0) // panicking handlers are tested
	s.Start()
	t.Cleanup(func() {
		s.Close()
		_ = l.Close()
		_ = rdb.Close()          // ends the calls requests stopped waiting for
		idempotency.WaitCalls(h) // and they are gone
	})
	return replica{Server: s, handler: h}
}

// handlerOf is New(l, tenant, opts...)'s middleware applied to next; a
// construction error fails the test.
func handlerOf(t *testing.T, next http.Handler, l *mutex.Locker, opts ...idempotency.Option) http.Handler {
	t.Helper()
	mw, err := idempotency.New(l, tenant, opts...)
	require.NoError(t, err)
	return mw(next)
}

type result struct {
	status int
	header http.Header
	body   string
	err    error
}

func (r result) replayed() bool { return r.header.Get(idempotency.DefaultReplayHeader) == "true" }

// client is an HTTP client whose idle connections are closed at the end of
// the test (goleak).
func client(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// req is one request: tenant and key ("" for no header; sent as given, so
// a test can send a malformed one) and body.
type req struct {
	tenant, key, body string
	hdr               http.Header
}

// post sends rq as a POST to url+"/payments".
func post(ctx context.Context, c *http.Client, url string, rq req) result {
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/payments", strings.NewReader(rq.body))
	if err != nil {
		return result{err: err}
	}
	r.Header.Set("Content-Type", "application/json")
	for k, v := range rq.hdr {
		r.Header[k] = v
	}
	if rq.tenant != "" {
		r.Header.Set(scopeHeader, rq.tenant)
	}
	if rq.key != "" {
		r.Header.Set(idempotency.HeaderName, rq.key)
	}
	resp, err := c.Do(r)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
}

// mustPost is post that fails the test on a transport error.
func mustPost(t *testing.T, c *http.Client, url string, rq req) result {
	t.Helper()
	res := post(context.Background(), c, url, rq)
	require.NoError(t, res.err)
	return res
}

// waitFor polls cond, with a deadline: the tests wait for a condition,
// never for a time.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
