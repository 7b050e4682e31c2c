package httplock_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	httplock "github.com/redfence/redfence/redis/httplock"
)

// onPath marks a request's context: a Redis command whose context carries
// it was made on that request's path.
type onPath struct{}

// pathHook counts a client's commands made on a request's path, and the
// PINGs made on none (the probe's).
type pathHook struct{ onPath, probes atomic.Int64 }

func (h *pathHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pathHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch {
		case ctx.Value(onPath{}) != nil:
			h.onPath.Add(1)
		case cmd.Name() == "ping":
			h.probes.Add(1)
		}
		return next(ctx, cmd)
	}
}

func (h *pathHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if ctx.Value(onPath{}) != nil {
			h.onPath.Add(1)
		}
		return next(ctx, cmds)
	}
}

// TestRedisDownOrHung ("Redis down or hung"): Redis stopped, or paused
// (SIGSTOP: connections open, nothing answers), behind go-redis clients
// with default options. The first request on each replica finds out and
// goes to the origin as its local flight's leader; the next ones make no
// Redis call at all; when Redis is back, the probe notices and requests
// collapse across replicas again.
func TestRedisDownOrHung(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fail, heal func(*redistest.RedisServer)
	}{
		{"stopped", (*redistest.RedisServer).Kill, (*redistest.RedisServer).Restart},
		{"paused", (*redistest.RedisServer).Pause, (*redistest.RedisServer).Resume},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := redistest.StartRedis(t)
			var calls atomic.Int64
			origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				fmt.Fprint(w, "page")
			})
			hook := &pathHook{}
			servers := make([]*httptest.Server, 2)
			for i := range servers {
				rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // go-redis's defaults
				rdb.AddHook(hook)
				l, err := redistest.NewLocker(rdb)
				require.NoError(t, err)
				h := handlerOf(t, origin, l)
				mark := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), onPath{}, true)))
				})
				s := httptest.NewServer(mark)
				servers[i] = s
				t.Cleanup(func() {
					s.Close()
					httplock.WaitProbe(h)
					_ = l.Close()
					_ = rdb.Close()
				})
			}
			c := client(t)
			send := func(s *httptest.Server, path string) result {
				r := get(context.Background(), c, http.MethodGet, s.URL+path, nil)
				require.NoError(t, r.err)
				assert.Equal(t, "page", r.body)
				return r
			}
			for _, s := range servers {
				assert.NotEqual(t, httplock.RoleBypass, send(s, "/up").role, "Redis up")
			}

			tc.fail(srv)
			// The first request on each replica calls Redis and finds it
			// failing (both at once: a paused server costs each one the
			// client's read timeout).
			var wg sync.WaitGroup
			for _, s := range servers {
				wg.Go(func() { assert.Equal(t, httplock.RoleLeader, send(s, "/first").role) })
			}
			wg.Wait()
			before := hook.onPath.Load()
			begin := time.Now()
			for i := range 20 {
				r := send(servers[i%2], fmt.Sprintf("/down/%d", i))
				assert.Equal(t, httplock.RoleLeader, r.role, "its local flight's leader")
			}
			t.Logf("20 requests while Redis is down: %v", time.Since(begin))
			assert.Equal(t, before, hook.onPath.Load(), "a Redis call on a request's path after Redis was found down")

			if tc.name == "stopped" {
				// While down, requests keep coming; probes run beside them, one
				// at a time per replica, at most one every probe interval.
				start, probes := time.Now(), hook.probes.Load()
				for time.Since(start) < 1500*time.Millisecond {
					send(servers[0], "/down")
					send(servers[1], "/down")
					time.Sleep(5 * time.Millisecond)
				}
				n := hook.probes.Load() - probes
				assert.Positive(t, n, "no probe while Redis was down")
				assert.LessOrEqual(t, n, int64(2*4), "more than one probe per replica every 500 ms")
				assert.Equal(t, before, hook.onPath.Load())
			}

			tc.heal(srv)
			// Requests go on, each to the origin, until a probe finds Redis
			// back; then each replica shares through it again: the second of
			// two requests in a row is served what the first stored.
			for i, s := range servers {
				n := 0
				require.Eventually(t, func() bool {
					n++
					path := fmt.Sprintf("/back/%d/%d", i, n)
					send(s, path)
					return send(s, path).role == httplock.RoleShared
				}, 15*time.Second, 20*time.Millisecond, "replica %d never found Redis back", i)
			}
			n := calls.Load()
			rs := burst(t, servers, 5, http.MethodGet, "/after", nil)
			assert.Equal(t, n+1, calls.Load(), "one origin call for the burst once Redis is back")
			assert.Equal(t, map[string]int{httplock.RoleLeader: 1, httplock.RoleShared: len(rs) - 1}, roles(rs))
		})
	}
}

// TestRedisDownStillCollapsesInProcess: with Redis stopped and marked down,
// a burst of identical requests to one replica costs one origin call, every
// other request is served its response, and no request calls Redis.
func TestRedisDownStillCollapsesInProcess(t *testing.T) {
	srv := redistest.StartRedis(t)
	var calls atomic.Int64
	hook := &pathHook{}
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	rdb.AddHook(hook)
	l, err := redistest.NewLocker(rdb)
	require.NoError(t, err)
	h := handlerOf(t, slowOrigin(&calls, 200*time.Millisecond), l)
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), onPath{}, true)))
	}))
	t.Cleanup(func() {
		s.Close()
		httplock.WaitProbe(h)
		_ = l.Close()
		_ = rdb.Close()
	})

	srv.Kill()
	first := get(context.Background(), client(t), http.MethodGet, s.URL+"/first", nil)
	require.NoError(t, first.err)
	require.Positive(t, hook.onPath.Load(), "the first request found Redis down")

	const n = 20
	before, origin := hook.onPath.Load(), calls.Load()
	rs := burst(t, []*httptest.Server{s}, n, http.MethodGet, "/burst", nil)
	assert.Equal(t, origin+1, calls.Load(), "one origin call for the burst on one replica")
	assert.Equal(t, before, hook.onPath.Load(), "a Redis call on a request's path while Redis was down")
	assert.Equal(t, map[string]int{httplock.RoleLeader: 1, httplock.RoleShared: n - 1}, roles(rs))
	for i, r := range rs {
		require.NoError(t, r.err, "request %d", i)
		assert.Equal(t, http.StatusOK, r.status)
		assert.Equal(t, rs[0].body, r.body, "request %d", i)
	}
}

// TestProbeEndsWhenTheClientCloses: a probe stuck on a hung server ends
// when the Locker's client is closed.
func TestProbeEndsWhenTheClientCloses(t *testing.T) {
	srv := redistest.StartRedis(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	l, err := redistest.NewLocker(rdb)
	require.NoError(t, err)
	h := handlerOf(t, okHandler, l, httplock.WithStoreTimeout(50*time.Millisecond))
	serve := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/p", nil))
		return rec.Header().Get(httplock.DefaultRoleHeader)
	}
	require.NotEqual(t, httplock.RoleBypass, serve())
	srv.Pause()
	require.Equal(t, httplock.RoleLeader, serve(), "finds Redis hung: serves as its local leader")
	// Requests until one starts a probe, which hangs on the paused server.
	require.Eventually(t, func() bool {
		serve()
		return httplock.Probing(h)
	}, 5*time.Second, 10*time.Millisecond)
	_ = l.Close()
	late := testutil.MeasureLateness(t)
	begin := time.Now()
	require.NoError(t, rdb.Close())
	httplock.WaitProbe(h)
	assert.Less(t, time.Since(begin), late.Bound(time.Second), "the probe outlived its client")
}
