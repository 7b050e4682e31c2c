package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/asynqlock"
	"github.com/redfence/redfence/redis/httplock"
	"github.com/redfence/redfence/redis/idempotency"
	"github.com/redfence/redfence/redis/redisdriver"
)

// compare also measures the client the README showed before newClient
// (ContextTimeoutEnabled alone), for bench/README.md; it only logs.
var compare = flag.Bool("outage.compare", false, "also log the medians of the README's earlier client")

// outageSamples is how many times each call is measured, each on a client
// of its own: the first calls of an outage, before go-redis's pool counts
// enough failed dials to stop dialing.
const outageSamples = 5

// outageSlack is what a call may take beyond its caller's own bound when
// the server refuses connections.
const outageSlack = 100 * time.Millisecond

// outageCall is one call of the table: prepare builds what it needs on a
// Locker (not timed) and returns the call, whose error must match every
// one of is (nil when is is empty); bound is the caller's own bound on it.
type outageCall struct {
	name    string
	bound   time.Duration
	is      []error
	prepare func(t *testing.T, l *mutex.Locker) func() error
}

// lockWait is the deadline the Lock case gives its call: Lock waits as long
// as its ctx allows, also while the store is down.
const lockWait = 200 * time.Millisecond

func outageCalls() []outageCall {
	bg := context.Background()
	return []outageCall{
		{"Locker.Lock", lockWait, []error{mutex.ErrNotAcquired, mutex.ErrUnavailable, context.DeadlineExceeded},
			func(t *testing.T, l *mutex.Locker) func() error {
				return func() error {
					ctx, cancel := context.WithTimeout(bg, lockWait)
					defer cancel()
					_, err := l.Lock(ctx, "outage")
					return err
				}
			}},
		{"Locker.TryLock", 0, []error{mutex.ErrUnavailable},
			func(t *testing.T, l *mutex.Locker) func() error {
				return func() error { _, err := l.TryLock(bg, "outage"); return err }
			}},
		{"Locker.Close", 0, nil, // a replica stopping during the outage
			func(t *testing.T, l *mutex.Locker) func() error {
				_, err := l.TryLock(bg, "outage") // leaves a clean-up behind, which Close waits for
				require.ErrorIs(t, err, mutex.ErrUnavailable)
				return l.Close
			}},
		{"Semaphore.TryAcquire", 0, []error{mutex.ErrUnavailable},
			func(t *testing.T, l *mutex.Locker) func() error {
				s, err := mutex.NewSemaphore(l, "outage", 2)
				require.NoError(t, err)
				return func() error { _, err := s.TryAcquire(bg); return err }
			}},
		{"election.Leader", 0, []error{mutex.ErrUnavailable},
			func(t *testing.T, l *mutex.Locker) func() error {
				e, err := election.New(l, "outage")
				require.NoError(t, err)
				return func() error { _, err := e.Leader(bg); return err }
			}},
		{"httplock", 0, nil, // served by the origin, collapsed in-process only
			func(t *testing.T, l *mutex.Locker) func() error {
				mw, err := httplock.New(l)
				require.NoError(t, err)
				h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "page") }))
				return func() error {
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/page", nil))
					if rec.Code != http.StatusOK || rec.Body.String() != "page" || rec.Header().Get(httplock.DefaultRoleHeader) != httplock.RoleLeader {
						return fmt.Errorf("got %d %q, role %q; want the origin's page as its local leader",
							rec.Code, rec.Body, rec.Header().Get(httplock.DefaultRoleHeader))
					}
					return nil
				}
			}},
		{"idempotency", 0, nil, // 503, the handler not run
			func(t *testing.T, l *mutex.Locker) func() error {
				mw, err := idempotency.New(l, func(*http.Request) string { return "tenant" })
				require.NoError(t, err)
				var ran atomic.Bool
				h := mw(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					ran.Store(true)
					w.WriteHeader(http.StatusCreated)
				}))
				return func() error {
					rec := httptest.NewRecorder()
					r := httptest.NewRequest(http.MethodPost, "/payments", strings.NewReader(`{}`))
					r.Header.Set("Idempotency-Key", "outage-1")
					r.Header.Set("Content-Type", "application/json")
					h.ServeHTTP(rec, r)
					if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), idempotency.ProblemUnavailable) || ran.Load() {
						return fmt.Errorf("got %d %s (handler ran: %v); want 503 %s", rec.Code, rec.Body, ran.Load(), idempotency.ProblemUnavailable)
					}
					return nil
				}
			}},
		{"asynqlock", 0, []error{mutex.ErrUnavailable},
			func(t *testing.T, l *mutex.Locker) func() error {
				mw, err := asynqlock.New(l)
				require.NoError(t, err)
				h := mw(asynq.HandlerFunc(func(context.Context, *asynq.Task) error { return errors.New("the handler ran") }))
				task := asynq.NewTask("outage", []byte("42"))
				return func() error { return h.ProcessTask(bg, task) }
			}},
	}
}

// TestRedisRefusingEveryCallAnswersAtOnce: with the server refusing
// connections, behind the README's client, every call of the table gives
// its documented answer within outageSlack beyond its caller's own bound
// (scaled by the timer lateness measured meanwhile), from the first call
// of the outage on.
func TestRedisRefusingEveryCallAnswersAtOnce(t *testing.T) {
	url := "redis://" + testutil.RefusedAddr(t)
	if os.Getenv(envCountLogs) != "" {
		var logged atomic.Int64
		redis.SetLogger(countingLogger{&logged})
		defer func() { fmt.Printf("%s%d\n", goRedisLinesPrefix, logged.Load()) }()
	}
	for _, c := range outageCalls() {
		t.Run(c.name+"/readme", func(t *testing.T) {
			for i, took := range measureOutage(t, c, url, newClient) {
				assert.Less(t, took.d, took.late.Bound(c.bound+outageSlack), "sample %d took %v", i, took.d)
				if len(c.is) == 0 {
					assert.NoError(t, took.err, "sample %d", i)
				}
				for _, want := range c.is {
					assert.ErrorIs(t, took.err, want, "sample %d", i)
				}
			}
		})
		if *compare {
			t.Run(c.name+"/earlier", func(t *testing.T) { measureOutage(t, c, url, earlierClient) })
		}
	}
}

// outageSample is one timed call: how long it took, its error, and the
// lateness measured while it ran.
type outageSample struct {
	d    time.Duration
	err  error
	late *testutil.Lateness
}

// measureOutage times c's call outageSamples times at url, each on a
// client (newClient's) and Locker of its own, and logs the median.
func measureOutage(t *testing.T, c outageCall, url string, newClient func(string) (*redis.Client, error)) []outageSample {
	samples := make([]outageSample, 0, outageSamples)
	for range outageSamples {
		rdb, err := newClient(url)
		require.NoError(t, err)
		drv, err := redisdriver.New(rdb)
		require.NoError(t, err)
		l, err := mutex.New(drv)
		require.NoError(t, err)
		call := c.prepare(t, l)
		s := outageSample{late: testutil.MeasureLateness(t)}
		start := time.Now()
		s.err = call()
		s.d = time.Since(start)
		s.late.Stop()
		if err := l.Close(); !errors.Is(err, mutex.ErrClosed) { // the Close case closed it
			require.NoError(t, err)
		}
		require.NoError(t, rdb.Close())
		samples = append(samples, s)
	}
	ds := make([]time.Duration, len(samples))
	for i, s := range samples {
		ds[i] = s.d
	}
	slices.Sort(ds)
	t.Logf("median %v (min %v, max %v)", ds[len(ds)/2], ds[0], ds[len(ds)-1])
	return samples
}

// earlierClient is the client the README showed before newClient:
// go-redis's defaults but ContextTimeoutEnabled.
func earlierClient(url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true
	return redis.NewClient(opt), nil
}

// envCountLogs makes the outage test route go-redis's log lines to a
// counter, as the README suggests quieting them, and print the count.
const (
	envCountLogs       = "REDFENCE_OUTAGE_COUNT_LOGS"
	goRedisLinesPrefix = "go-redis log lines: "
)

type countingLogger struct{ n *atomic.Int64 }

func (l countingLogger) Printf(context.Context, string, ...any) { l.n.Add(1) }

// TestRedisRefusingWritesNothingToStderr: the outage test, in a process of
// its own with go-redis's logger routed elsewhere (redis.SetLogger, as the
// README says), leaves that process's stderr empty: redfence itself writes
// nothing, while go-redis had lines to log.
func TestRedisRefusingWritesNothingToStderr(t *testing.T) {
	if os.Getenv(envCountLogs) != "" {
		t.Skip("the child process runs the outage test alone")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRedisRefusingEveryCallAnswersAtOnce$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envCountLogs+"=1")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "child process:\n%s%s", stdout.String(), stderr.String())
	assert.Empty(t, stderr.String(), "the child's stderr")
	_, count, ok := strings.Cut(stdout.String(), goRedisLinesPrefix)
	require.True(t, ok, "child process:\n%s", stdout.String())
	count, _, _ = strings.Cut(count, "\n")
	n, err := strconv.Atoi(count)
	require.NoError(t, err)
	assert.Positive(t, n, "go-redis logged nothing: the check would not see its lines")
}
