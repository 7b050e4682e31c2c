package idempotency_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/redis/idempotency"
)

// deadline is outer middleware giving each request a deadline, as
// http.TimeoutHandler or a gateway's budget does.
func deadline(d time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(r.Context(), d)
			defer cancel()
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// TestRedisDown: Redis stopped, or paused (SIGSTOP: connections open,
// nothing answers), behind a go-redis client with default options (no
// ContextTimeoutEnabled: its calls do not end at a deadline by
// themselves). A request gets the configured answer, 503 (Refuse) or the
// handler's (PassThrough), within its own deadline, although the Redis
// timeout is far longer. When Redis is back, keys work again.
func TestRedisDown(t *testing.T) {
	const budget = 300 * time.Millisecond
	for _, fail := range []struct {
		name       string
		fail, heal func(*redistest.RedisServer)
	}{
		{"stopped", (*redistest.RedisServer).Kill, (*redistest.RedisServer).Restart},
		{"paused", (*redistest.RedisServer).Pause, (*redistest.RedisServer).Resume},
	} {
		for _, mode := range []struct {
			name   string
			mode   idempotency.OnUnavailable
			status int
		}{
			{"refuse", idempotency.Refuse, http.StatusServiceUnavailable},
			{"pass-through", idempotency.PassThrough, http.StatusCreated},
		} {
			t.Run(fail.name+"/"+mode.name, func(t *testing.T) {
				srv := redistest.StartRedis(t)
				h := &charge{}
				rep := replicaWith(t, redis.NewClient(&redis.Options{Addr: srv.Addr()}), h, deadline(budget),
					idempotency.WithOnUnavailable(mode.mode), idempotency.WithStoreTimeout(time.Minute))
				c := client(t)
				warm := mustPost(t, c, rep.URL, req{tenant: "acme", key: `"warm"`, body: `{}`})
				require.Equal(t, http.StatusCreated, warm.status) // connections open: a pause hangs them

				fail.fail(srv)
				late := testutil.MeasureLateness(t)
				start := time.Now()
				res := mustPost(t, c, rep.URL, req{tenant: "acme", key: key, body: `{}`})
				took := time.Since(start)
				late.Stop()
				assert.Equal(t, mode.status, res.status, res.body)
				assert.Less(t, took, late.Bound(budget+200*time.Millisecond), "answered within the request's deadline")
				if mode.mode == idempotency.Refuse {
					assert.Equal(t, idempotency.ProblemUnavailable, problemType(t, res))
					assert.Equal(t, "1", res.header.Get("Retry-After"))
					assert.EqualValues(t, 1, h.calls.Load(), "the handler did not run")
				} else {
					assert.EqualValues(t, 2, h.calls.Load(), "the handler ran, unprotected")
				}

				fail.heal(srv)
				// Until Redis is back, "after" is refused (or passed through,
				// unstored); then it is stored, and replayed from then on.
				waitFor(t, "keys working again", func() bool {
					return post(t.Context(), c, rep.URL, req{tenant: "acme", key: `"after"`, body: `{}`}).replayed()
				})
			})
		}
	}
}
