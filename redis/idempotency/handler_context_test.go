package idempotency_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/idempotency"
)

// TestClientTimeoutIsNotTheKeysResult: the case the header exists
// for is a client that times out and retries. The handler's context does
// not end when that client hangs up, so an idiomatic handler (its bank
// call takes ctx) goes on, and the retry gets its success: a failure made
// only because the first client left would be stored and replayed to
// every retry, and the payment could never be made with its key. (The
// example's handler ignores its context, so it does not show this.)
func TestClientTimeoutIsNotTheKeysResult(t *testing.T) {
	_, srv := redistest.Redis(t)
	started, bank, gaveUp := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var calls atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			close(started)
		}
		select {
		case <-bank: // the bank call, made with r.Context()
		case <-r.Context().Done():
			close(gaveUp)
			http.Error(w, "bank call: "+context.Cause(r.Context()).Error(), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	reps := replicasOn(t, srv, 2, h, nil)
	c := client(t)
	rq := req{tenant: "acme", key: key, body: `{"amount":100}`}
	ctx, timeout := context.WithCancel(t.Context())
	first := make(chan result, 1)
	go func() { first <- post(ctx, c, reps[0].URL, rq) }()
	<-started
	timeout() // the client gives up on its first attempt
	require.Error(t, (<-first).err)
	// A handler whose context outlives its client never gives up: the bank
	// then answers after a bound, and the retry must get its success.
	late := testutil.MeasureLateness(t)
	select {
	case <-gaveUp:
	case <-time.After(late.Bound(time.Second)):
	}
	late.Stop()
	close(bank)
	var res result
	waitFor(t, "an answer other than 409", func() bool {
		res = mustPost(t, c, reps[1].URL, rq)
		return res.status != http.StatusConflict
	})
	assert.Equal(t, http.StatusCreated, res.status, "the retry got the abandoned attempt's failure: %s (replayed: %v)", res.body, res.replayed())
}

// TestHandlerContextEndsWhenLockLost: the handler's context outlives its
// client but not its lock: once renewals fail past the lease, it ends with
// mutex.ErrLockLost, for a retry may run the handler then.
func TestHandlerContextEndsWhenLockLost(t *testing.T) {
	srv := redistest.StartRedis(t)
	proxy := testutil.Proxy(t, srv.Addr())
	started, cause := make(chan struct{}), make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			cause <- context.Cause(r.Context())
		case <-t.Context().Done():
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	a := replicaWith(t, redis.NewClient(&redis.Options{Addr: proxy.Addr(), ContextTimeoutEnabled: true}), h, nil,
		idempotency.WithTTL(200*time.Millisecond), idempotency.WithStoreTimeout(100*time.Millisecond))
	first := make(chan result, 1)
	go func() { first <- post(t.Context(), client(t), a.URL, req{tenant: "acme", key: key, body: "{}"}) }()
	<-started
	proxy.BlackHole()
	late := testutil.MeasureLateness(t)
	select {
	case err := <-cause:
		assert.ErrorIs(t, err, mutex.ErrLockLost)
	case <-time.After(late.Bound(5 * time.Second)): // 25 leases
		t.Error("the handler's context outlived its lock")
	}
	late.Stop()
	proxy.Cut()
	proxy.Heal()
	<-first
}
