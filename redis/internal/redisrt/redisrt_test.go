package redisrt_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func TestContextAware(t *testing.T) {
	assert.False(t, redisrt.ContextAware(nil))
	assert.False(t, redisrt.ContextAware((*redis.Client)(nil)))
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer c.Close()
	assert.True(t, redisrt.ContextAware(c))
	c2 := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer c2.Close()
	assert.False(t, redisrt.ContextAware(c2))
}

func TestRunnerCallDirect(t *testing.T) {
	r := redisrt.NewRunner(true)
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	assert.True(t, r.Direct(ctx))
	pending, err := r.Call(ctx, func(context.Context) error { return errors.New("boom") })
	assert.Nil(t, pending)
	assert.EqualError(t, err, "boom")
}

// A call the caller stops waiting for reports its end on pending, and Close
// waits for it.
func TestRunnerCallAbandoned(t *testing.T) {
	r := redisrt.NewRunner(false)
	release := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	assert.False(t, r.Direct(ctx))
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	pending, err := r.Call(ctx, func(context.Context) error {
		close(started)
		<-release
		return errors.New("late")
	})
	require.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, pending)
	settled := r.Settled(pending)
	select {
	case <-settled:
		t.Fatal("settled before the call ended")
	default:
	}
	close(release)
	<-settled
	<-settled // any number of times
	r.Close()
}

func TestRunnerGoAfterClose(t *testing.T) {
	r := redisrt.NewRunner(false)
	var n atomic.Int32
	for range 40 {
		r.Go(func() { n.Add(1) })
	}
	r.Close()
	assert.EqualValues(t, 40, n.Load())
	r.Go(func() { n.Add(1) }) // runs before Go returns
	assert.EqualValues(t, 41, n.Load())
	// A call after Close runs inline: a clean-up Close waits for still
	// reaches the server.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	_, err := r.Call(ctx, func(context.Context) error { n.Add(1); return nil })
	assert.NoError(t, err)
	assert.EqualValues(t, 42, n.Load())
	r.Close() // idempotent
}

func TestRunnerAfterwardWaitsForPending(t *testing.T) {
	r := redisrt.NewRunner(false)
	defer r.Close()
	pending := make(chan error, 1)
	ran := make(chan struct{})
	r.Afterward(pending, func(ctx context.Context) {
		_, ok := ctx.Deadline()
		assert.True(t, ok, "bounded by its own timeout")
		close(ran)
	})
	select {
	case <-ran:
		t.Fatal("ran before pending delivered")
	case <-time.After(20 * time.Millisecond): // a bound on a negative, not synchronisation
	}
	pending <- nil
	<-ran
}

func TestAbandoned(t *testing.T) {
	r := redisrt.NewRunner(false)
	defer r.Close()
	a := redisrt.NewAbandoned(r)
	ctx := context.Background()
	require.NoError(t, a.Wait(ctx, "none"))
	a.Add("x", nil)
	assert.Equal(t, 0, a.Len())

	p1, p2 := make(chan error, 1), make(chan error, 1)
	a.Add("owner", p1)
	a.Add("owner", p2)
	assert.Equal(t, 2, a.Len())
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	require.ErrorIs(t, a.Wait(short, "owner"), context.DeadlineExceeded)

	done := make(chan error, 1)
	go func() { done <- a.Wait(ctx, "owner") }()
	p1 <- nil
	p2 <- errors.New("x")
	require.NoError(t, <-done)
	assert.Nil(t, a.Done("nobody"))
	require.Eventually(t, func() bool { return a.Len() == 0 }, time.Second, time.Millisecond)
}

func TestUnanswered(t *testing.T) {
	for name, tc := range map[string]struct {
		err  error
		want bool
	}{
		"nil":      {nil, false},
		"canceled": {context.Canceled, false},
		"closed":   {redis.ErrClosed, false},
		"reply":    {redis.Nil, false},
		"deadline": {context.DeadlineExceeded, true},
		"net":      {&net.OpError{Op: "dial", Err: errors.New("refused")}, true},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, tc.want, redisrt.Unanswered(tc.err)) })
	}
	var r *redisrt.Reloader
	r.NoAnswer(context.DeadlineExceeded) // nil: nothing
	redisrt.NewReloader(nil).NoAnswer(context.DeadlineExceeded)
}

func TestSubscriberWakes(t *testing.T) {
	c, _ := redistest.Redis(t)
	s := redisrt.NewSubscriber(redisrt.SubscriberConfig{
		Channel: func(key string) string { return key + ":released" },
		Targets: func(string) []redisrt.Target { return []redisrt.Target{{Name: "", Client: c}} },
		Accept:  func(p string) bool { return p == "" || p == "me" },
	})
	defer s.Close()
	woken := make(chan struct{}, 8)
	ready, stop := s.Watch("k", func() { woken <- struct{}{} })
	require.NotNil(t, ready)
	<-ready
	ctx := context.Background()
	require.NoError(t, c.Publish(ctx, "k:released", "other").Err())
	require.NoError(t, c.Publish(ctx, "k:released", "me").Err())
	<-woken // "other" was not ours; "me" is
	stop()
	stop() // idempotent
	select {
	case <-woken:
		t.Fatal("woken for a release reserved for another Locker")
	default:
	}
}

func TestSubscriberWithoutTargets(t *testing.T) {
	s := redisrt.NewSubscriber(redisrt.SubscriberConfig{})
	ready, stop := s.Watch("k", nil)
	require.NotNil(t, ready)
	select {
	case <-ready:
		t.Fatal("ready closed although nothing will be reported")
	default:
	}
	stop()
	s.Close()
	s.Close()
}

// The first of two overlapping watches of one key, stopped late (a queue
// left and a new one watched before the first's stop ran), leaves the
// second subscribed: its waiters still hear releases. Stopping twice is a
// no-op.
func TestOverlappingWatches(t *testing.T) {
	c, _ := redistest.Redis(t)
	s := redisrt.NewSubscriber(redisrt.SubscriberConfig{
		Channel: func(key string) string { return key + ":released" },
		Targets: func(string) []redisrt.Target { return []redisrt.Target{{Name: "", Client: c}} },
	})
	defer s.Close()
	_, first := s.Watch("overlap", func() {})
	_, second := s.Watch("overlap", func() {})
	require.True(t, redisrt.Wanted(s, "overlap:released"))
	first()
	first()
	assert.True(t, redisrt.Wanted(s, "overlap:released"), "the first watch's stop ended the second")
	second()
	assert.False(t, redisrt.Wanted(s, "overlap:released"))
}
