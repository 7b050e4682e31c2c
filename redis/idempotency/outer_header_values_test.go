package idempotency_test

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/idempotency"
)

// TestOuterValuesOfAppendedHeaderNotReplayed: outer middleware's
// headers are never replayed, also when the handler adds a value to a
// header outer middleware had set (Set-Cookie, a trace header, Vary): a
// replay carries the handler's values beside the retry's own outer
// values, never the first request's (its session cookie).
func TestOuterValuesOfAppendedHeaderNotReplayed(t *testing.T) {
	var ids atomic.Int64
	outer := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := ids.Add(1)
			w.Header().Add("Set-Cookie", fmt.Sprint("session=outer-", id))
			w.Header().Add("X-Trace", fmt.Sprint("outer-", id))
			next.ServeHTTP(w, r)
		})
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Add("Set-Cookie", "pref=dark")
		w.Header().Add("X-Trace", "handler")
		w.WriteHeader(http.StatusCreated)
	})
	_, srv := redistest.Redis(t)
	reps := replicasOn(t, srv, 2, h, outer, idempotency.WithReplayHeaders("Set-Cookie"))
	c := client(t)
	rq := req{tenant: "acme", key: key, body: "{}"}
	first := mustPost(t, c, reps[0].URL, rq)
	require.Equal(t, []string{"session=outer-1", "pref=dark"}, first.header.Values("Set-Cookie"))
	again := mustPost(t, c, reps[1].URL, rq)
	require.True(t, again.replayed())
	assert.NotContains(t, again.header.Values("Set-Cookie"), "session=outer-1", "the first request's session cookie, set by outer middleware, was replayed")
	assert.NotContains(t, again.header.Values("X-Trace"), "outer-1", "outer middleware's value of the first request was replayed")
	assert.Contains(t, again.header.Values("X-Trace"), "handler")
	assert.Contains(t, again.header.Values("Set-Cookie"), "session=outer-2", "the retry's own outer cookie is kept")
	assert.Contains(t, again.header.Values("X-Trace"), "outer-2", "the retry's own outer value is kept")
}
