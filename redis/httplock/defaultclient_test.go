package httplock_test

import (
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

// TestHungRedisWithADefaultClient: clients built as go-redis's defaults
// build them (no ContextTimeoutEnabled: a hung server holds a GET for the
// client's ReadTimeout, 5 s in go-redis v9.23), Redis paused (SIGSTOP), 20 identical requests
// to each of 3 replicas at once. Each replica's leader gives up on Redis
// within WithStoreTimeout, not the client's ReadTimeout, and its followers
// get its response: one origin call per replica, each begun within the
// store timeout of the burst.
func TestHungRedisWithADefaultClient(t *testing.T) {
	const storeTimeout = 100 * time.Millisecond
	srv := redistest.StartRedis(t)
	var calls atomic.Int64
	var mu sync.Mutex
	var began []time.Time // each origin call's start
	origin := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		began = append(began, time.Now())
		mu.Unlock()
		slowOrigin(&calls, 50*time.Millisecond).ServeHTTP(w, r)
	})
	servers := make([]*httptest.Server, 3)
	for i := range servers {
		rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // go-redis's defaults
		l, err := redistest.NewLocker(rdb)
		require.NoError(t, err)
		h := handlerOf(t, origin, l, httplock.WithStoreTimeout(storeTimeout))
		s := httptest.NewServer(h)
		servers[i] = s
		t.Cleanup(func() {
			s.Close()
			_ = l.Close()
			_ = rdb.Close() // ends the calls to the paused server
			httplock.WaitProbe(h)
		})
	}
	c := client(t)
	for _, s := range servers { // a connection each, and Redis known up
		r := get(t.Context(), c, http.MethodGet, s.URL+"/warm", nil)
		require.NoError(t, r.err)
		require.NotEqual(t, httplock.RoleBypass, r.role)
	}

	mu.Lock()
	warm := len(began)
	mu.Unlock()

	srv.Pause()
	late := testutil.MeasureLateness(t)
	begin := time.Now()
	rs := burst(t, servers, 20, http.MethodGet, "/hung", nil)
	late.Stop()
	for i, r := range rs {
		require.NoError(t, r.err, "request %d", i)
		assert.Equal(t, http.StatusOK, r.status, "request %d", i)
	}
	assert.Equal(t, int64(warm+3), calls.Load(), "one origin call per replica")
	assert.Equal(t, map[string]int{httplock.RoleLeader: 3, httplock.RoleShared: 57}, roles(rs))
	mu.Lock()
	defer mu.Unlock()
	// The burst's goroutines and connections take a moment to start: a
	// wide margin, still far below the client's 5 s.
	bound := late.Bound(storeTimeout + 500*time.Millisecond)
	for _, at := range began[warm:] {
		assert.Less(t, at.Sub(begin), bound, "an origin call waited for the client's ReadTimeout")
	}
}
