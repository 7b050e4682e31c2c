package asynqlock_test

import (
	"context"
	"errors"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
)

// Misconfiguration is reported by New, wrapping ErrInvalid, never later.
func TestBadConfiguration(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	var nilLocker *mutex.Locker
	// A Locker whose construction failed is nil: New refuses it as such.
	broken, err := redistest.NewLocker(nil)
	require.ErrorIs(t, err, mutex.ErrInvalid)
	for _, tc := range []struct {
		name   string
		locker *mutex.Locker
		opts   []asynqlock.Option
	}{
		{"nil locker", nilLocker, nil},
		{"locker of a failed construction", broken, nil},
		{"nil key function", l, []asynqlock.Option{asynqlock.WithKey(nil)}},
		{"zero TTL", l, []asynqlock.Option{asynqlock.WithTTL(0)}},
		{"negative TTL", l, []asynqlock.Option{asynqlock.WithTTL(-time.Second)}},
		{"TTL below mutex.MinTTL", l, []asynqlock.Option{asynqlock.WithTTL(time.Millisecond)}},
		{"TTL above mutex.MaxTTL", l, []asynqlock.Option{asynqlock.WithTTL(mutex.MaxTTL + time.Second)}},
		{"negative wait", l, []asynqlock.Option{asynqlock.WithWait(-time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			var mw asynq.MiddlewareFunc
			assert.NotPanics(t, func() { mw, err = asynqlock.New(tc.locker, tc.opts...) })
			assert.ErrorIs(t, err, asynqlock.ErrInvalid)
			assert.Nil(t, mw)
		})
	}
	mw, err := asynqlock.New(l, nil, asynqlock.WithTracerProvider(nil), asynqlock.WithMeterProvider(nil))
	require.NoError(t, err, "nil options and nil providers are ignored")
	require.NotNil(t, mw)
	mw, err = asynqlock.New(l, asynqlock.WithTracerProvider((*sdktrace.TracerProvider)(nil)),
		asynqlock.WithMeterProvider((*sdkmetric.MeterProvider)(nil)))
	require.NoError(t, err, "typed-nil providers mean the globals")
	assert.NotPanics(t, func() { _ = mw(asynq.HandlerFunc(ok)).ProcessTask(context.Background(), asynq.NewTask("t", nil)) })
}

// process runs one task through the middleware, with next as the handler.
func process(t *testing.T, l *mutex.Locker, key string, next asynq.HandlerFunc, opts ...asynqlock.Option) error {
	t.Helper()
	mw, err := asynqlock.New(l, append([]asynqlock.Option{asynqlock.WithKey(func(*asynq.Task) (string, error) { return key, nil })}, opts...)...)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return mw(next).ProcessTask(ctx, asynq.NewTask("transfer", nil))
}

func ok(context.Context, *asynq.Task) error { return nil }

// A busy key is ErrLocked (asynq retries it without counting a failure);
// a Redis that cannot be reached is a failure asynq counts, with or
// without WithWait, never ErrLocked.
func TestBusyKeyAndOutageAreDistinct(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	ctx := context.Background()
	lk, err := l.Lock(ctx, "asynq:busy")
	require.NoError(t, err)
	defer lk.Release(ctx)
	for _, wait := range []time.Duration{0, 100 * time.Millisecond} {
		err := process(t, l, "busy", ok, asynqlock.WithWait(wait))
		assert.ErrorIs(t, err, asynqlock.ErrLocked, "wait %v", wait)
		assert.False(t, asynqlock.IsFailure(err), "wait %v", wait)
	}

	down := redis.NewClient(&redis.Options{Addr: testutil.RefusedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = down.Close() })
	dl := redistest.Locker(t, down)
	for _, wait := range []time.Duration{0, time.Second} {
		called := false
		err := process(t, dl, "k", func(context.Context, *asynq.Task) error { called = true; return nil }, asynqlock.WithWait(wait))
		assert.False(t, called, "wait %v: the handler ran without the lock", wait)
		assert.NotErrorIs(t, err, asynqlock.ErrLocked, "wait %v: an outage is not a busy key", wait)
		assert.ErrorIs(t, err, mutex.ErrUnavailable, "wait %v", wait)
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, "wait %v", wait)
		assert.True(t, asynqlock.IsFailure(err), "wait %v: asynq must count the outage", wait)
	}
}

// Keys the lock cannot take fail the task with an error that says so.
func TestBadKeys(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	boom := errors.New("no account in payload")
	mw, err := asynqlock.New(l, asynqlock.WithKey(func(*asynq.Task) (string, error) { return "", boom }))
	require.NoError(t, err)
	err = mw(asynq.HandlerFunc(ok)).ProcessTask(context.Background(), asynq.NewTask("transfer", nil))
	assert.ErrorIs(t, err, boom)
	assert.True(t, asynqlock.IsFailure(err))

	err = process(t, l, "", ok)
	assert.ErrorContains(t, err, "empty key")
	assert.True(t, asynqlock.IsFailure(err))

	err = process(t, l, strings.Repeat("k", mutex.MaxKeyLen), ok)
	assert.ErrorIs(t, err, mutex.ErrInvalid, "a key over mutex.MaxKeyLen with its prefix")
	assert.True(t, asynqlock.IsFailure(err))
}

// The handler's context ends when asynq's does, with asynq's cause, and
// carries the token.
func TestHandlerContextEndsWithAsynqs(t *testing.T) {
	c, _ := redistest.Redis(t)
	l := redistest.Locker(t, c)
	mw, err := asynqlock.New(l)
	require.NoError(t, err)
	stop := errors.New("asynq shutting down")
	ctx, cancel := context.WithCancelCause(context.Background())
	err = mw(asynq.HandlerFunc(func(hctx context.Context, _ *asynq.Task) error {
		tok, ok := asynqlock.Token(hctx)
		assert.True(t, ok)
		assert.Positive(t, tok)
		cancel(stop)
		<-hctx.Done()
		return context.Cause(hctx)
	})).ProcessTask(ctx, asynq.NewTask("t", []byte("p")))
	assert.ErrorIs(t, err, stop)
}
