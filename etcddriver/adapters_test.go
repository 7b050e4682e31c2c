package etcddriver_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/etcddriver/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	httplock "github.com/redfence/redfence/middleware/httplock"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/runner"
)

// httplock keeps its shared responses in Redis. An etcd Locker lends no
// Redis client, so it refuses one when it is built, saying so, and nothing
// is sent anywhere. runner keeps its claims in the etcd Backend itself
// (backend.SlotClaimer) and accepts it.
func TestAdaptersOverEtcd(t *testing.T) {
	s := etcdtest.Start(t)
	be := etcddriver.New(s.Client(t))
	t.Cleanup(func() { assert.NoError(t, be.Close()) })
	l := mutex.NewWithBackend(be)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	require.NoError(t, l.Err())
	require.Nil(t, l.Client(), "an etcd Locker lends no Redis client")

	_, err := httplock.New(l)
	assert.ErrorIs(t, err, httplock.ErrNeedsRedis)
	assert.ErrorIs(t, err, httplock.ErrInvalid)
	assert.ErrorContains(t, err, "the Locker lends no Redis client")
	assert.ErrorContains(t, err, "etcd")
	_, err = httplock.NewHandler(http.NotFoundHandler(), l)
	assert.ErrorIs(t, err, httplock.ErrNeedsRedis)

	r := runner.New(l)
	assert.NoError(t, r.Add("nightly", time.Hour, func(context.Context, runner.Run) error { return nil }))
	_, err = r.Last(context.Background(), "nightly")
	assert.ErrorIs(t, err, runner.ErrNoRun, "asked etcd")
}

// A backend that neither lends a Redis client nor claims slots leaves the
// runner nowhere to keep its claims: refused when built, sending nothing.
func TestRunnerRefusesABackendWithoutSlots(t *testing.T) {
	plain := struct{ backend.Backend }{etcddriver.New(noServer{})}
	l := mutex.NewWithBackend(plain)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	r := runner.New(l)
	err := testutil.Safely(t, time.Second, func() error {
		return r.Add("nightly", time.Hour, func(context.Context, runner.Run) error { return nil })
	})
	assert.ErrorIs(t, err, runner.ErrNeedsRedis)
	assert.ErrorIs(t, err, runner.ErrInvalid)
	assert.ErrorContains(t, err, "claims no slots")
	assert.ErrorIs(t, testutil.Safely(t, time.Second, func() error { return r.Run(context.Background()) }), runner.ErrNeedsRedis)
	err = testutil.Safely(t, time.Second, func() error { _, err := r.Last(context.Background(), "nightly"); return err })
	assert.ErrorIs(t, err, runner.ErrNeedsRedis)
}

// Bad input to a runner over etcd is refused before any request.
func TestRunnerBadInputOverEtcd(t *testing.T) {
	l := mutex.NewWithBackend(etcddriver.New(noServer{}))
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	r := runner.New(l)
	job := func(context.Context, runner.Run) error { return nil }
	var noCtx context.Context // nil: the bad input
	for name, call := range map[string]func() error{
		"empty name":   func() error { return r.Add("", time.Hour, job) },
		"bad interval": func() error { return r.Add("x", time.Microsecond, job) },
		"nil job":      func() error { return r.Add("x", time.Hour, nil) },
		"last no name": func() error { _, err := r.Last(context.Background(), ""); return err },
		"last long": func() error {
			_, err := r.Last(context.Background(), strings.Repeat("x", runner.MaxNameLen+1))
			return err
		},
		"last nil ctx": func() error { _, err := r.Last(noCtx, "x"); return err },
		"run nil ctx":  func() error { return r.Run(noCtx) },
	} {
		t.Run(name, func(t *testing.T) {
			assert.ErrorIs(t, testutil.Safely(t, time.Second, call), runner.ErrInvalid)
		})
	}
}

// The etcd Backend keeps no semaphores and no read-write locks (it has no
// backend.Semaphorer, backend.RWLocker): the Locker refuses both when they
// are built, before anything is sent.
func TestSemaphoreAndRWMutexUnsupportedOverEtcd(t *testing.T) {
	s := etcdtest.Start(t)
	be := etcddriver.New(s.Client(t))
	t.Cleanup(func() { assert.NoError(t, be.Close()) })
	l := mutex.NewWithBackend(be)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	_, err := l.Semaphore("x", 2)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = l.RWMutex("x")
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.ErrorContains(t, err, "etcd")
}
