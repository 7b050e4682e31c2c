package httplock_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	httplock "github.com/redfence/redfence/redis/httplock"
)

// replicas starts n servers, each with its own Redis client and Locker as
// separate processes would have, all wrapping origin with httplock.
func replicas(t *testing.T, n int, origin http.Handler, opts ...httplock.Option) []*httptest.Server {
	t.Helper()
	return wrappedReplicas(t, n, origin, func(h http.Handler) http.Handler { return h }, opts...)
}

// handlerOf is New(l, opts...)'s middleware applied to next; a
// construction error fails the test.
func handlerOf(t *testing.T, next http.Handler, l *mutex.Locker, opts ...httplock.Option) http.Handler {
	t.Helper()
	mw, err := httplock.New(l, opts...)
	require.NoError(t, err)
	return mw(next)
}

// wrappedReplicas is replicas with outer in front of the middleware.
func wrappedReplicas(t *testing.T, n int, origin http.Handler, outer func(http.Handler) http.Handler, opts ...httplock.Option) []*httptest.Server {
	t.Helper()
	_, srv := redistest.Redis(t)
	return replicasOn(t, srv, n, origin, outer, opts...)
}

// replicasOn is wrappedReplicas on a given Redis server.
func replicasOn(t *testing.T, srv *redistest.RedisServer, n int, origin http.Handler, outer func(http.Handler) http.Handler, opts ...httplock.Option) []*httptest.Server {
	t.Helper()
	out := make([]*httptest.Server, n)
	for i := range out {
		c := srv.Client()
		l, err := redistest.NewLocker(c)
		require.NoError(t, err)
		mw, err := httplock.New(l, opts...)
		require.NoError(t, err)
		s := httptest.NewUnstartedServer(outer(mw(origin)))
		s.Config.ErrorLog = log.New(io.Discard, "", 0) // panicking handlers are tested
		s.Start()
		out[i] = s
		t.Cleanup(func() {
			s.Close()
			_ = l.Close()
			_ = c.Close()
		})
	}
	return out
}

type result struct {
	status int
	header http.Header
	body   string
	role   string
	end    time.Time
	err    error
}

// client is an HTTP client whose idle connections are closed at the end of
// the test (goleak).
func client(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 256}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// serviceHost is the name clients reach every replica under, as through a
// load balancer: the Host is in the key, and requests for one site share.
const serviceHost = "app.example"

// get sends one request. hdr's "Host", if any, is the request's Host
// (serviceHost otherwise); the rest are headers.
func get(ctx context.Context, c *http.Client, method, url string, hdr http.Header) result {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return result{err: err}
	}
	req.Host = serviceHost
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v[0]
			continue
		}
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err, end: time.Now()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, header: resp.Header, body: string(b),
		role: resp.Header.Get(httplock.DefaultRoleHeader), end: time.Now(), err: err}
}

// burst sends per concurrent requests to every server at once.
func burst(t *testing.T, servers []*httptest.Server, per int, method, path string, hdr http.Header) []result {
	c := client(t)
	start := make(chan struct{})
	out := make([]result, len(servers)*per)
	var wg sync.WaitGroup
	for i := range out {
		s := servers[i%len(servers)]
		wg.Go(func() {
			<-start
			out[i] = get(context.Background(), c, method, s.URL+path, hdr)
		})
	}
	close(start)
	wg.Wait()
	return out
}

func roles(rs []result) map[string]int {
	m := map[string]int{}
	for _, r := range rs {
		m[r.role]++
	}
	return m
}

// slowOrigin answers after delay with a body naming the call, so a shared
// response is recognisable.
func slowOrigin(calls *atomic.Int64, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		select {
		case <-time.After(delay): // the origin's latency, what the stampede is about
		case <-r.Context().Done():
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Origin-Call", fmt.Sprint(n))
		w.Header().Add("X-Multi", "a")
		w.Header().Add("X-Multi", "b")
		w.WriteHeader(http.StatusOK)
		fmt.Fprintf(w, "page %s computed by call %d", r.URL.Path, n)
	})
}

func TestStampedeOneOriginCall(t *testing.T) {
	var calls atomic.Int64
	servers := replicas(t, 4, slowOrigin(&calls, 200*time.Millisecond))
	late := testutil.MeasureLateness(t)
	rs := burst(t, servers, 50, http.MethodGet, "/report?id=7", nil)
	late.Stop()

	require.Equal(t, int64(1), calls.Load(), "one origin call for 200 identical requests on 4 replicas")
	first := rs[0]
	require.NoError(t, first.err)
	var leaderEnd, lastEnd time.Time
	for i, r := range rs {
		require.NoError(t, r.err, "request %d", i)
		assert.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, "page /report computed by call 1", r.body)
		assert.Equal(t, clean(first.header), clean(r.header), "request %d headers", i)
		if r.role == httplock.RoleLeader {
			leaderEnd = r.end
		} else if r.end.After(lastEnd) {
			lastEnd = r.end
		}
	}
	assert.Equal(t, map[string]int{httplock.RoleLeader: 1, httplock.RoleShared: 199}, roles(rs))
	lag := lastEnd.Sub(leaderEnd)
	t.Logf("last follower finished %v after the leader", lag)
	// A follower that missed the publication would poll, 100-200 ms later;
	// 90 ms leaves room for 199 responses on two loaded cores (make test runs
	// the packages in parallel; 60 ms was seen once), plus what this test's
	// own timers were late by (a host busier still: 180 ms was seen).
	assert.Less(t, lag, late.Bound(90*time.Millisecond), "followers finish soon after the leader")

	// Within the share window a later request is served from Redis.
	later := get(context.Background(), client(t), http.MethodGet, servers[2].URL+"/report?id=7", nil)
	assert.Equal(t, httplock.RoleShared, later.role)
	assert.Equal(t, int64(1), calls.Load())
}

func clean(h http.Header) http.Header {
	h = h.Clone()
	h.Del("Date")
	h.Del(httplock.DefaultRoleHeader)
	return h
}

func TestDifferentKeysDoNotWait(t *testing.T) {
	block := make(chan struct{})
	started := make(chan struct{}, 1)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started <- struct{}{}
			<-block
		}
		fmt.Fprint(w, r.URL.Path)
	})
	servers := replicas(t, 2, origin)
	c := client(t)
	slow := make(chan result, 1)
	go func() { slow <- get(context.Background(), c, http.MethodGet, servers[0].URL+"/slow", nil) }()
	<-started
	for _, s := range servers {
		r := get(context.Background(), c, http.MethodGet, s.URL+"/fast", nil)
		require.NoError(t, r.err)
		assert.Equal(t, "/fast", r.body, "another key is served while /slow's leader is busy")
	}
	// The same path with another query is another key too.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r := get(ctx, c, http.MethodGet, servers[1].URL+"/fast?x=1", nil)
	require.NoError(t, r.err)
	close(block)
	require.NoError(t, (<-slow).err)
}

func TestNeverShared(t *testing.T) {
	big := strings.Repeat("x", 2048)
	cases := []struct {
		name    string
		method  string
		hdr     http.Header
		handler func(w http.ResponseWriter, r *http.Request)
	}{
		{"POST", http.MethodPost, nil, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }},
		{"Set-Cookie", http.MethodGet, nil, func(w http.ResponseWriter, r *http.Request) {
			http.SetCookie(w, &http.Cookie{Name: "s", Value: "1"})
			fmt.Fprint(w, "ok")
		}},
		{"no-store", http.MethodGet, nil, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "max-age=0, no-store")
			fmt.Fprint(w, "ok")
		}},
		{"private", http.MethodGet, nil, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Cache-Control", "private")
			fmt.Fprint(w, "ok")
		}},
		{"Vary star", http.MethodGet, nil, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Vary", "*")
			fmt.Fprint(w, "ok")
		}},
		{"oversize", http.MethodGet, nil, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, big[:1000])
			fmt.Fprint(w, big[1000:]) // crosses the 1 KiB bound mid-stream
		}},
		{"streaming", http.MethodGet, nil, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "part 1;")
			http.NewResponseController(w).Flush()
			fmt.Fprint(w, "part 2")
		}},
		{"5xx", http.MethodGet, nil, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}},
		{"Authorization", http.MethodGet, http.Header{"Authorization": {"Bearer x"}}, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "ok") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int64
			origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				time.Sleep(20 * time.Millisecond) // origin latency, so the requests overlap
				tc.handler(w, r)
			})
			servers := replicas(t, 2, origin, httplock.WithMaxBody(1024))
			rs := burst(t, servers, 3, tc.method, "/x", tc.hdr)
			for _, r := range rs {
				require.NoError(t, r.err)
				assert.NotEqual(t, httplock.RoleShared, r.role)
				if tc.name == "oversize" {
					assert.Equal(t, big, r.body, "the leader's client gets the whole oversize body")
				}
				if tc.name == "streaming" {
					assert.Equal(t, "part 1;part 2", r.body)
				}
			}
			assert.Equal(t, int64(len(rs)), calls.Load(), "every request reached the origin")
		})
	}
}

func TestVaryHeaderFromResponse(t *testing.T) {
	var calls atomic.Int64
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		w.Header().Set("Vary", "Accept-Language")
		fmt.Fprint(w, "hello in "+r.Header.Get("Accept-Language"))
	})
	servers := replicas(t, 1, origin)
	c := client(t)
	en := get(context.Background(), c, http.MethodGet, servers[0].URL+"/v", http.Header{"Accept-Language": {"en"}})
	de := get(context.Background(), c, http.MethodGet, servers[0].URL+"/v", http.Header{"Accept-Language": {"de"}})
	en2 := get(context.Background(), c, http.MethodGet, servers[0].URL+"/v", http.Header{"Accept-Language": {"en"}})
	assert.Equal(t, "hello in en", en.body)
	assert.Equal(t, "hello in de", de.body, "a different Vary value is not served the leader's copy")
	assert.Equal(t, httplock.RoleBypass, de.role)
	assert.Equal(t, "hello in en", en2.body)
	assert.Equal(t, httplock.RoleShared, en2.role)
	assert.Equal(t, int64(2), calls.Load())
}

// subscribers counts the requests waiting on another replica's leader: the
// subscribers of the middleware's channels (0 when Redis does not answer).
// It runs in handlers, so it reports nothing to the test itself.
func subscribers(c *redis.Client) int64 {
	ctx := context.Background()
	chans, err := c.PubSubChannels(ctx, httplock.DefaultPrefix+"*").Result()
	if err != nil || len(chans) == 0 {
		return 0
	}
	counts, err := c.PubSubNumSub(ctx, chans...).Result()
	if err != nil {
		return 0
	}
	var n int64
	for _, v := range counts {
		n += v
	}
	return n
}

// TestPanickingLeaderReleasesFollowers: the first origin call panics. Its
// caller sees net/http's behaviour (the connection is dropped); followers, on
// its replica and on the others, are released at once and call the origin,
// or answer WithPanicStatus.
func TestPanickingLeaderReleasesFollowers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []httplock.Option
		status int
	}{
		{"origin call", nil, http.StatusOK},
		{"502", []httplock.Option{httplock.WithPanicStatus(http.StatusBadGateway)}, http.StatusBadGateway},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const requests = 10 // 2 replicas × 5
			var calls, arrived atomic.Int64
			var mws []http.Handler // each replica's middleware; set before any request
			rdb, srv := redistest.Redis(t)
			origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if calls.Add(1) == 1 {
					// Panic only once every request is in, waiting behind
					// us: the other replica's leader subscribed, and each
					// replica's other requests joined its flight. A request
					// that has not begun to wait when the leader ends leads
					// a flight of its own.
					following := func() int { return httplock.Following(mws[0]) + httplock.Following(mws[1]) }
					deadline := time.Now().Add(5 * time.Second)
					for (arrived.Load() < requests || subscribers(rdb) < 1 || following() < requests-2) && time.Now().Before(deadline) {
						time.Sleep(time.Millisecond) // poll with a deadline
					}
					assert.Equal(t, requests-2, following(), "requests in the replicas' flights when the leader panics")
					panic("origin bug")
				}
				fmt.Fprint(w, "recovered")
			})
			count := func(next http.Handler) http.Handler {
				mws = append(mws, next)
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					arrived.Add(1)
					next.ServeHTTP(w, r)
				})
			}
			servers := replicasOn(t, srv, 2, origin, count, append(tc.opts, httplock.WithWait(10*time.Second))...)
			begin := time.Now()
			rs := burst(t, servers, requests/2, http.MethodGet, "/p", nil)
			require.Equal(t, int64(requests), arrived.Load())
			failed := 0
			for _, r := range rs {
				if r.err != nil {
					failed++
					continue
				}
				assert.Equal(t, tc.status, r.status)
				assert.Less(t, r.end.Sub(begin), 3*time.Second, "a follower was held long after the panic")
			}
			assert.Equal(t, 1, failed, "only the panicking leader's client sees the failure")
		})
	}
}

// TestStalledLeader: a leader stuck in its handler holds followers no longer
// than their wait (WithWait); with a short TTL, the next request goes
// through after the TTL instead.
func TestStalledLeader(t *testing.T) {
	run := func(t *testing.T, opts ...httplock.Option) ([]result, time.Duration, int64, *testutil.Lateness) {
		var calls atomic.Int64
		unstall := make(chan struct{})
		origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				<-unstall
			}
			fmt.Fprint(w, "fresh")
		})
		servers := replicas(t, 2, origin, opts...)
		late := testutil.MeasureLateness(t)
		begin := time.Now()
		c := client(t)
		stalled := make(chan result, 1)
		go func() { stalled <- get(context.Background(), c, http.MethodGet, servers[0].URL+"/s", nil) }()
		require.Eventually(t, func() bool { return calls.Load() == 1 }, 5*time.Second, time.Millisecond)
		rs := burst(t, servers, 3, http.MethodGet, "/s", nil)
		took := time.Since(begin)
		close(unstall)
		<-stalled
		return rs, took, calls.Load(), late
	}
	t.Run("wait", func(t *testing.T) {
		rs, took, _, late := run(t, httplock.WithWait(300*time.Millisecond), httplock.WithTTL(time.Minute))
		for _, r := range rs {
			require.NoError(t, r.err)
			assert.Equal(t, "fresh", r.body)
			assert.Equal(t, httplock.RoleBypass, r.role)
		}
		assert.GreaterOrEqual(t, took, 300*time.Millisecond)
		assert.Less(t, took, late.Bound(2*time.Second), "followers are released at their wait")
	})
	t.Run("TTL", func(t *testing.T) {
		rs, took, calls, late := run(t, httplock.WithWait(10*time.Second), httplock.WithTTL(300*time.Millisecond))
		for _, r := range rs {
			require.NoError(t, r.err)
			assert.Equal(t, "fresh", r.body)
		}
		assert.Less(t, took, late.Bound(3*time.Second), "one more request goes through after the TTL")
		assert.Equal(t, int64(2), calls, "the stalled call and one more; the rest share the second")
	})
}

// TestLeaderClientDisconnects: the leader's client gives up mid-computation;
// the handler keeps a live context and the followers get the full response.
func TestLeaderClientDisconnects(t *testing.T) {
	var calls atomic.Int64
	started := make(chan struct{})
	proceed := make(chan struct{})
	handlerErr := make(chan error, 1)
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		close(started)
		<-proceed
		handlerErr <- r.Context().Err()
		fmt.Fprint(w, "complete")
	})
	// The server sees the leader's client go away: the request context of
	// the first request, outside the middleware, ends.
	disconnected := make(chan struct{})
	var first sync.Once
	outer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			first.Do(func() { context.AfterFunc(r.Context(), func() { close(disconnected) }) })
			next.ServeHTTP(w, r)
		})
	}
	servers := wrappedReplicas(t, 2, origin, outer)
	c := client(t)
	ctx, cancel := context.WithCancel(context.Background())
	leader := make(chan result, 1)
	go func() { leader <- get(ctx, c, http.MethodGet, servers[0].URL+"/d", nil) }()
	<-started
	followers := make(chan result, 4)
	for i := range 4 {
		go func() { followers <- get(context.Background(), c, http.MethodGet, servers[i%2].URL+"/d", nil) }()
	}
	cancel()
	assert.ErrorIs(t, (<-leader).err, context.Canceled)
	<-disconnected
	close(proceed)
	require.NoError(t, <-handlerErr, "the leader's handler context is detached from its client")
	for range 4 {
		r := <-followers
		require.NoError(t, r.err)
		assert.Equal(t, "complete", r.body)
		assert.Equal(t, httplock.RoleShared, r.role)
	}
	assert.Equal(t, int64(1), calls.Load())
}
