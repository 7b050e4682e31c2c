package etcddriver_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/runner"
)

// runner keeps its claims in the etcd Driver itself (backend.SlotClaimer)
// and accepts it. (The Redis adapters' refusal of a Locker that lends no
// Redis client is tested in their own module.)
func TestAdaptersOverEtcd(t *testing.T) {
	s := etcdtest.Start(t)
	l, _, _ := locker(t, s)
	r, err := runner.New(l)
	require.NoError(t, err)
	assert.NoError(t, r.Add("nightly", time.Hour, func(context.Context, runner.Run) error { return nil }))
	_, err = r.Last(context.Background(), "nightly")
	assert.ErrorIs(t, err, runner.ErrNoRun, "asked etcd")
}

// A backend that neither lends a Redis client nor claims slots leaves the
// runner nowhere to keep its claims: refused when built, sending nothing.
func TestRunnerRefusesABackendWithoutSlots(t *testing.T) {
	plain := struct{ backend.Backend }{driverOn(t, noServer{})}
	l, err := mutex.New(plain)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	err = testutil.Safely(t, time.Second, func() error {
		r, err := runner.New(l)
		assert.Nil(t, r)
		return err
	})
	assert.ErrorIs(t, err, runner.ErrNeedsRedis)
	assert.ErrorIs(t, err, runner.ErrInvalid)
	assert.ErrorContains(t, err, "claims no slots")
}

// Bad input to a runner over etcd is refused before any request.
func TestRunnerBadInputOverEtcd(t *testing.T) {
	l := lockerOn(t, driverOn(t, noServer{}))
	r, err := runner.New(l)
	require.NoError(t, err)
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

// The etcd Driver keeps no semaphores and no read-write locks (it has no
// backend.Semaphorer, backend.RWLocker): the Locker refuses both when they
// are built, before anything is sent.
func TestSemaphoreAndRWMutexUnsupportedOverEtcd(t *testing.T) {
	l, _, _ := locker(t, etcdtest.Start(t))
	_, err := mutex.NewSemaphore(l, "x", 2)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	_, err = mutex.NewRWMutex(l, "x")
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.ErrorContains(t, err, "etcd")
}
