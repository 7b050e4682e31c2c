package httplock_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	httplock "github.com/redfence/redfence/redis/httplock"
)

// TestUnshareableReleasesWaitersAtOnce: the leader's response turns out not
// to be shared while its handler still runs (a stream, a long poll, a large
// download). The requests waiting on it, on its replica and on the other,
// call the origin at once, while the leader's handler is still blocked; the
// leader's client gets its whole response once the handler ends.
func TestUnshareableReleasesWaitersAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(w http.ResponseWriter) // the leader's, before it blocks
		opts  []httplock.Option
		body  string // the leader's, whole
	}{
		{"no-store", func(w http.ResponseWriter) {
			w.Header().Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusOK)
		}, nil, "end"},
		{"flush", func(w http.ResponseWriter) {
			fmt.Fprint(w, "data: 1\n\n")
			w.(http.Flusher).Flush()
		}, nil, "data: 1\n\nend"},
		{"past max body", func(w http.ResponseWriter) {
			fmt.Fprint(w, "0123456789")
		}, []httplock.Option{httplock.WithMaxBody(4)}, "0123456789end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			unblock := make(chan struct{})
			release := sync.OnceFunc(func() { close(unblock) })
			defer release() // before the servers close: they wait for the leader
			followed := make(chan struct{}, 2)
			// A wait and TTL far past the test's bound: a
			// follower calls the origin early only if it was released.
			opts := append(tc.opts, httplock.WithWait(time.Minute), httplock.WithTTL(time.Minute))
			p := newPair(t, func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("X-Lead") == "" {
					followed <- struct{}{}
					fmt.Fprint(w, "own")
					return
				}
				tc.write(w)
				<-unblock
				fmt.Fprint(w, "end")
			}, opts...)
			c := client(t)
			first := make(chan result, 1)
			go func() {
				first <- get(context.Background(), c, http.MethodGet, p.servers[0].URL+"/stream", http.Header{"X-Lead": {"1"}})
			}()
			require.Eventually(t, func() bool { return p.calls.Load() >= 1 }, 5*time.Second, time.Millisecond)
			// One waits on the other replica (the pair's origin holds the
			// leader until it has subscribed), one on the leader's own.
			rs := make(chan result, 2)
			for _, s := range p.servers {
				go func() { rs <- get(context.Background(), c, http.MethodGet, s.URL+"/stream", nil) }()
			}
			for range 2 {
				select {
				case <-followed:
				case <-time.After(10 * time.Second):
					t.Fatal("a follower still waits on a leader whose response will not be shared")
				}
			}
			release()
			for range 2 {
				r := <-rs
				require.NoError(t, r.err)
				assert.Equal(t, httplock.RoleBypass, r.role)
				assert.Equal(t, "own", r.body)
			}
			a := <-first
			require.NoError(t, a.err)
			assert.Equal(t, httplock.RoleLeader, a.role)
			assert.Equal(t, tc.body, a.body)
			assert.Equal(t, int64(3), p.calls.Load())
		})
	}
}
