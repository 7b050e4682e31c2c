package redisinspect_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisinspect"
)

// calls are the Inspector's three, each called on ctx.
func calls(in *redisinspect.Inspector, key string) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"Inspect": func(ctx context.Context) error { _, err := in.Inspect(ctx, key); return err },
		"List": func(ctx context.Context) error {
			_, err := in.List(ctx, backend.ListRequest{Count: 10, Scans: 1})
			return err
		},
		"ForceRelease": func(ctx context.Context) error {
			_, err := in.ForceRelease(ctx, key, backend.Force{Reason: "r"})
			return err
		},
	}
}

// A bad Config or bad input is an error matching backend.ErrInvalid, at
// once, with no server asked and no panic.
func TestBadInput(t *testing.T) {
	dead, asked := redistest.DeadClient(t)
	one := []redis.UniversalClient{dead}
	three := []redis.UniversalClient{dead, dead, dead}
	noGo := redisinspect.New(redisinspect.Config{Prefix: prefix, Servers: one})
	for name, in := range map[string]*redisinspect.Inspector{
		"nil Inspector":   nil,
		"no servers":      redisinspect.New(redisinspect.Config{Go: func(fn func()) { fn() }}),
		"nil Go":          noGo,
		"nil server":      newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{nil}}),
		"nil client":      redisinspect.New(redisinspect.Config{Servers: []redis.UniversalClient{(*redis.Client)(nil)}, Go: func(fn func()) { fn() }}),
		"too many addrs":  newInspector(t, redisinspect.Config{Servers: one, Addrs: []string{"a", "b"}}),
		"quorum too big":  newInspector(t, redisinspect.Config{Servers: one, Quorum: 2}),
		"no quorum":       newInspector(t, redisinspect.Config{Servers: three}),
		"unknown publish": newInspector(t, redisinspect.Config{Servers: one, Publish: "NOTIFY"}),
	} {
		for call, fn := range calls(in, "k") {
			err := testutil.Safely(t, time.Second, func() error { return fn(context.Background()) })
			assert.ErrorIs(t, err, backend.ErrInvalid, "%s: %s", name, call)
		}
	}

	in := newInspector(t, redisinspect.Config{Servers: one})
	for call, fn := range calls(in, "") {
		if call == "List" {
			continue
		}
		err := testutil.Safely(t, time.Second, func() error { return fn(context.Background()) })
		assert.ErrorIs(t, err, backend.ErrInvalid, "empty key: %s", call)
	}
	for call, fn := range calls(in, "k") {
		err := testutil.Safely(t, time.Second, func() error { return fn(nil) })
		assert.ErrorIs(t, err, backend.ErrInvalid, "nil context: %s", call)
	}
	_, err := in.ForceRelease(context.Background(), "k", backend.Force{Token: -1, Reason: "r"})
	assert.ErrorIs(t, err, backend.ErrInvalid)
	assert.Zero(t, asked.N(), "no server was asked")
}

// A server that does not answer by the caller's deadline is an outcome
// unknown, never an answer (not a free key, not nobody holding it, not an
// empty listing), and the driver hears of it; with a client that does not
// apply deadlines to its sockets.
func TestHungServer(t *testing.T) {
	addr, _ := testutil.HungServer(t)
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	unanswered := make(chan error, 16)
	in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}, NoAnswer: func(err error) { unanswered <- err }})
	for name, call := range calls(in, "k") {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err := call(ctx)
			assert.ErrorIs(t, err, backend.ErrUnavailable)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
			if name != "List" { // (a listing's SCAN is not eachServer's)
				assert.ErrorIs(t, <-unanswered, context.DeadlineExceeded, "the driver hears of it")
			}
		})
	}
}

// Inspection returns when its ctx is cancelled, also with a client that
// applies ctx deadlines to its sockets (which stops reading at a deadline,
// not at a cancellation): an operator's Ctrl-C is not held by a hung
// server.
func TestCancelled(t *testing.T) {
	for _, name := range []string{"Inspect", "List", "ForceRelease"} {
		t.Run(name, func(t *testing.T) {
			addr, accepted := testutil.HungServer(t)
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1})
			in := newInspector(t, redisinspect.Config{Servers: []redis.UniversalClient{c}, NoAnswer: func(err error) {
				t.Errorf("a cancel is no missing answer: %v", err)
			}})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			late := testutil.MeasureLateness(t)
			var cancelled time.Time
			done := make(chan struct{})
			go func() {
				defer close(done)
				select {
				case <-accepted: // the call waits on the server
					cancelled = time.Now()
					cancel()
				case <-ctx.Done():
				}
			}()
			err := calls(in, "k")[name](ctx)
			returned := time.Now()
			cancel()
			<-done
			assert.ErrorIs(t, err, context.Canceled)
			assert.Less(t, returned.Sub(cancelled), late.Bound(100*time.Millisecond))
		})
	}
}
