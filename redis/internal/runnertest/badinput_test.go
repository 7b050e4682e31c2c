package runnertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/runner"
)

// callBound is how long one bad-input call may take: it must fail at once.
const callBound = 5 * time.Second

// deadLocker is a Locker over a client for an address nothing listens on,
// whose every dial and command is counted: bad input must be turned away
// before any.
func deadLocker(t *testing.T) (*mutex.Locker, *redistest.Calls) {
	t.Helper()
	c, calls := redistest.DeadClient(t)
	return redistest.Locker(t, c), calls
}

func nop(context.Context, runner.Run) error { return nil }

func TestBadInput(t *testing.T) {
	l, redisHits := deadLocker(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	long := strings.Repeat("n", runner.MaxNameLen+1)
	var nilRunner *runner.Runner
	var nilTP *sdktrace.TracerProvider
	var nilMP *sdkmetric.MeterProvider

	// add registers a job named name on a Runner that already has "taken".
	add := func(name string, every time.Duration, fn runner.Job, opts ...runner.JobOption) func() error {
		return func() error {
			r, err := runner.New(l)
			if err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			if err := r.Add("taken", time.Second, nop); err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			return r.Add(name, every, fn, opts...)
		}
	}
	with := func(opts ...runner.JobOption) func() error { return add("job", time.Second, nop, opts...) }
	built := func(opts ...runner.Option) func() error {
		return func() error {
			r, err := runner.New(l, opts...)
			if err != nil {
				return err
			}
			return r.Add("job", time.Second, nop)
		}
	}
	last := func(ctx context.Context, name string) func() error {
		return func() error {
			r, err := runner.New(l)
			if err != nil {
				return fmt.Errorf("setup: %w", err)
			}
			_, err = r.Last(ctx, name)
			return err
		}
	}

	cases := []struct {
		name string
		call func() error
		want error // nil: accepted
	}{
		// The Runner itself.
		{"nil locker", func() error { _, err := runner.New(nil); return err }, runner.ErrInvalid},
		{"nil Runner: Add", func() error { return nilRunner.Add("job", time.Second, nop) }, runner.ErrInvalid},
		{"nil Runner: Run", func() error { return nilRunner.Run(cancelled) }, runner.ErrInvalid},
		{"nil Runner: Last", func() error { _, err := nilRunner.Last(cancelled, "job"); return err }, runner.ErrInvalid},
		{"zero Runner: Add", func() error { return new(runner.Runner).Add("job", time.Second, nop) }, runner.ErrInvalid},
		{"zero Runner: Run", func() error { return new(runner.Runner).Run(cancelled) }, runner.ErrInvalid},
		{"zero Runner: Last", func() error { _, err := new(runner.Runner).Last(cancelled, "job"); return err }, runner.ErrInvalid},

		// Contexts.
		{"nil ctx: Run", func() error {
			r, err := runner.New(l)
			if err != nil {
				return err
			}
			if err := r.Add("job", time.Second, nop); err != nil {
				return err
			}
			//lint:ignore SA1012 a nil ctx is the input under test
			return r.Run(nil)
		}, runner.ErrInvalid},
		{"nil ctx: Last", last(nil, "job"), runner.ErrInvalid}, // a nil ctx is the input under test

		// Names.
		{"empty name", add("", time.Second, nop), runner.ErrInvalid},
		{"duplicate name", add("taken", time.Second, nop), runner.ErrInvalid},
		{"name over MaxNameLen", add(long, time.Second, nop), runner.ErrInvalid},
		{"5000-byte name", add(strings.Repeat("n", 5000), time.Second, nop), runner.ErrInvalid},
		{"name of MaxNameLen", add(strings.Repeat("n", runner.MaxNameLen), time.Second, nop), nil},
		{"Last: empty name", last(cancelled, ""), runner.ErrInvalid},
		{"Last: name over MaxNameLen", last(cancelled, long), runner.ErrInvalid},

		// Intervals.
		{"zero interval", add("job", 0, nop), runner.ErrInvalid},
		{"negative interval", add("job", -time.Second, nop), runner.ErrInvalid},
		{"interval below MinInterval", add("job", runner.MinInterval-time.Millisecond, nop), runner.ErrInvalid},
		{"interval above MaxInterval", add("job", runner.MaxInterval+time.Millisecond, nop), runner.ErrInvalid},
		{"interval overflowing", add("job", math.MaxInt64, nop), runner.ErrInvalid},
		{"interval not whole ms", add("job", 10*time.Millisecond+time.Microsecond, nop), runner.ErrInvalid},
		{"interval of MaxInterval", add("job", runner.MaxInterval, nop), nil},

		// The job.
		{"nil job", add("job", time.Second, nil), runner.ErrInvalid},

		// Job options.
		{"negative jitter", with(runner.WithJitter(-1)), runner.ErrInvalid},
		{"jitter of the interval", with(runner.WithJitter(time.Second)), runner.ErrInvalid},
		{"jitter past the interval", with(runner.WithJitter(math.MaxInt64)), runner.ErrInvalid},
		{"zero timeout", with(runner.WithTimeout(0)), runner.ErrInvalid},
		{"negative timeout", with(runner.WithTimeout(-time.Second)), runner.ErrInvalid},
		{"huge timeout", with(runner.WithTimeout(math.MaxInt64)), nil},
		{"lock TTL below 10ms", with(runner.WithTTL(time.Millisecond)), runner.ErrInvalid},
		{"zero lock TTL", with(runner.WithTTL(0)), runner.ErrInvalid},
		{"lock TTL above 1h", with(runner.WithTTL(time.Hour + time.Millisecond)), runner.ErrInvalid},
		{"lock TTL overflowing", with(runner.WithTTL(math.MaxInt64)), runner.ErrInvalid},
		{"unknown missed policy", with(runner.WithMissed(7)), runner.ErrInvalid},
		{"negative missed policy", with(runner.WithMissed(-1)), runner.ErrInvalid},
		{"negative retries", with(runner.WithRetries(-1)), runner.ErrInvalid},
		{"most negative retries", with(runner.WithRetries(math.MinInt)), runner.ErrInvalid},
		{"negative offset", with(runner.WithOffset(-time.Millisecond)), runner.ErrInvalid},
		{"offset of the interval", with(runner.WithOffset(time.Second)), runner.ErrInvalid},
		{"offset past the interval", with(runner.WithOffset(math.MaxInt64)), runner.ErrInvalid},
		{"offset not whole ms", with(runner.WithOffset(time.Microsecond)), runner.ErrInvalid},
		{"offset below the interval", with(runner.WithOffset(999 * time.Millisecond)), nil},
		{"nil location", with(runner.WithLocation(nil)), runner.ErrInvalid},
		{"UTC", with(runner.WithLocation(time.UTC)), nil},
		{"nil job option", with(nil), nil},

		// Runner options.
		{"zero shutdown timeout", built(runner.WithShutdownTimeout(0)), runner.ErrInvalid},
		{"negative shutdown timeout", built(runner.WithShutdownTimeout(-1)), runner.ErrInvalid},
		{"empty replica id", built(runner.WithReplicaID("")), runner.ErrInvalid},
		{"nil clock", built(runner.WithClock(nil)), runner.ErrInvalid},
		{"nil option", built(nil), nil},
		{"nil error hook", built(runner.WithErrorHook(nil)), nil},
		{"empty prefix", built(runner.WithPrefix("")), nil},
		{"prefix with a brace", built(runner.WithPrefix("jobs{")), runner.ErrInvalid},
		{"nil tracer provider", built(runner.WithTracerProvider(nil)), nil},
		{"typed-nil tracer provider", built(runner.WithTracerProvider(nilTP)), nil},
		{"typed-nil meter provider", built(runner.WithMeterProvider(nilMP)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := testutil.Safely(t, callBound, tc.call)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			if assert.ErrorIs(t, err, tc.want) {
				assert.True(t, strings.HasPrefix(err.Error(), "runner: "), "%q names its package", err)
			}
		})
	}
	assert.Zero(t, redisHits.N(), "bad input reached Redis")
}

// TestRunning: once Run has started, Add and a second Run are refused.
func TestRunning(t *testing.T) {
	c, _ := redistest.Redis(t)
	r, err := runner.New(redistest.Locker(t, c))
	require.NoError(t, err)
	require.NoError(t, r.Add("job", time.Second, nop))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	require.Eventually(t, func() bool {
		return errors.Is(r.Add("late", time.Second, nop), runner.ErrRunning)
	}, callBound, time.Millisecond, "Add after Run started")
	assert.ErrorIs(t, testutil.Safely(t, callBound, func() error { return r.Run(ctx) }), runner.ErrRunning)
	assert.ErrorIs(t, testutil.Safely(t, callBound, func() error { return r.Add("", time.Second, nop) }), runner.ErrInvalid,
		"bad input is still bad input")
	cancel()
	require.NoError(t, <-done)
}

// TestLimitsRun: the largest inputs Add accepts work at run time: the
// longest name (braces included), the most retries.
func TestLimitsRun(t *testing.T) {
	c, _ := redistest.Redis(t)
	longest := strings.Repeat("}{", runner.MaxNameLen/2)
	var longRan, retriedRan atomic.Int64
	var hookErr atomic.Pointer[string]
	rp := startReplica(t, c, func(r *runner.Runner) {
		require.NoError(t, r.Add(longest, 50*time.Millisecond, func(context.Context, runner.Run) error {
			longRan.Add(1)
			return nil
		}))
		require.NoError(t, r.Add("max retries", 50*time.Millisecond, func(context.Context, runner.Run) error {
			retriedRan.Add(1) // before the fix, 1+MaxInt attempts wrapped to none
			return nil
		}, runner.WithRetries(math.MaxInt)))
	}, runner.WithErrorHook(func(name string, _ runner.Run, err error) {
		s := fmt.Sprintf("%.40q: %v", name, err)
		hookErr.Store(&s)
	}))
	var lr runner.LastRun
	require.Eventually(t, func() bool {
		var err error
		lr, err = rp.r.Last(context.Background(), longest)
		return err == nil && retriedRan.Load() > 0
	}, callBound, 10*time.Millisecond, "both jobs ran, the longest name's run is on record")
	require.NoError(t, rp.stop())
	assert.Equal(t, "ok", lr.Outcome)
	assert.Positive(t, longRan.Load())
	assert.Nil(t, hookErr.Load(), "no error at run time")
}

// A Redlock Locker is refused by New: its slot claims
// would rest on one of the masters alone.
func TestRedlockLockerRefused(t *testing.T) {
	clients, _ := redistest.RedisN(t, 3)
	r, err := runner.New(redistest.Redlock(t, clients))
	assert.Nil(t, r)
	assert.ErrorIs(t, err, runner.ErrInvalid)
	assert.ErrorIs(t, err, runner.ErrNeedsRedis)
	assert.ErrorContains(t, err, "Redlock")
}
