package runnertest

import (
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/runner"
)

// runUntil runs r until stop, which waits for Run to return.
func runUntil(t *testing.T, r *runner.Runner) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = r.Run(ctx); close(done) }()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop
}

// hookErrs collects the errors WithErrorHook reports.
func hookErrs() (chan error, runner.Option) {
	errs := make(chan error, 100)
	return errs, runner.WithErrorHook(func(_ string, _ runner.Run, err error) {
		select {
		case errs <- err:
		default:
		}
	})
}

// newLocker is a Locker on a client of srv's of its own, closed after it.
func newLocker(t *testing.T, srv *redistest.RedisServer) *mutex.Locker {
	t.Helper()
	c := srv.Client()
	t.Cleanup(func() { _ = c.Close() })
	l := redistest.Locker(t, c)
	return l
}

func firstErr(t *testing.T, errs <-chan error) error {
	t.Helper()
	select {
	case err := <-errs:
		return err
	case <-time.After(20 * time.Second):
		t.Fatal("no error reported")
		return nil
	}
}

// TestErrorsCarryTheCause: what the error hook gets says why a claim
// ended: its own bound, or the server's error when the client returned one.
func TestErrorsCarryTheCause(t *testing.T) {
	t.Run("claim bound", func(t *testing.T) {
		_, srv := redistest.Redis(t)
		srv.Pause() // no reply: the claim ends at its bound
		errs, hook := hookErrs()
		l := newLocker(t, srv)
		r := newRunner(t, l, hook)
		require.NoError(t, r.Add("tick", 100*time.Millisecond, func(context.Context, runner.Run) error { return nil }))
		stop := runUntil(t, r)
		err := firstErr(t, errs)
		stop()
		srv.Resume()
		assert.ErrorIs(t, err, context.DeadlineExceeded, "%v", err)
		assert.Contains(t, err.Error(), "no result from the backend within 50ms")
	})
	t.Run("claim bound with go-redis's default client", func(t *testing.T) {
		// Without ContextTimeoutEnabled the client waits its ReadTimeout
		// (5s): the claim still ends at its own bound.
		_, srv := redistest.Redis(t)
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		t.Cleanup(func() { _ = c.Close() })
		l := redistest.Locker(t, c)
		_, err := l.TryLock(context.Background(), "warm") // a connection made before the pause
		require.NoError(t, err)
		srv.Pause()
		t.Cleanup(srv.Resume)
		errs, hook := hookErrs()
		r := newRunner(t, l, hook)
		require.NoError(t, r.Add("tick", 100*time.Millisecond, func(context.Context, runner.Run) error { return nil }))
		late := testutil.MeasureLateness(t)
		started := time.Now()
		stop := runUntil(t, r)
		err = firstErr(t, errs)
		took := time.Since(started)
		srv.Resume() // the abandoned call ends; Run waits for it
		stop()
		assert.ErrorIs(t, err, context.DeadlineExceeded, "%v", err)
		assert.Contains(t, err.Error(), "no result from the backend within 50ms")
		assert.Less(t, took, late.Bound(time.Second), "the claim waited the client's ReadTimeout")
	})
	t.Run("server's error", func(t *testing.T) {
		_, srv := redistest.Redis(t)
		srv.Kill() // refused: the client says so within the claim's bound (2 s)
		errs, hook := hookErrs()
		l := newLocker(t, srv)
		r := newRunner(t, l, hook)
		require.NoError(t, r.Add("hourly", time.Hour, func(context.Context, runner.Run) error { return nil }))
		stop := runUntil(t, r)
		err := firstErr(t, errs)
		stop()
		assert.ErrorIs(t, err, syscall.ECONNREFUSED, "%v", err)
	})
}
