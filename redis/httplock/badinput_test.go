package httplock_test

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	httplock "github.com/redfence/redfence/redis/httplock"
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

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

func TestBadInput(t *testing.T) {
	l, redisHits := deadLocker(t)
	var nilClient *redis.Client
	var nilFunc http.HandlerFunc
	var nilMux *http.ServeMux
	var nilTP *sdktrace.TracerProvider
	var nilMP *sdkmetric.MeterProvider

	// with builds the middleware over l with opts and wraps a handler, as a
	// service does at start-up.
	with := func(opts ...httplock.Option) func() error {
		return func() error {
			mw, err := httplock.New(l, opts...)
			if err != nil {
				if mw != nil {
					return errors.New("a middleware along with an error")
				}
				return err
			}
			if mw(okHandler) == nil {
				return errors.New("nil handler without an error")
			}
			return nil
		}
	}
	over := func(locker *mutex.Locker) func() error {
		return func() error { _, err := httplock.New(locker); return err }
	}
	// failed builds a Locker over c, which its construction refuses (with
	// mutex.ErrInvalid, returning no Locker), and hands httplock what it
	// got, as a service that ignored the error would.
	failed := func(c redis.UniversalClient) func() error {
		return func() error {
			locker, err := redistest.NewLocker(c)
			if !errors.Is(err, mutex.ErrInvalid) || locker != nil {
				return fmt.Errorf("the Locker's construction: %v, %v", locker, err)
			}
			_, err = httplock.New(locker)
			return err
		}
	}
	// wrap applies New's middleware to next: the panic it documents for a
	// nil handler comes back as the error; any other panic goes on.
	wrap := func(next http.Handler) func() error {
		return func() (err error) {
			mw, err := httplock.New(l)
			if err != nil {
				return err
			}
			defer func() {
				if v := recover(); v != nil {
					if e, ok := v.(error); ok && errors.Is(e, httplock.ErrInvalid) {
						err = e
						return
					}
					panic(v)
				}
			}()
			mw(next)
			return nil
		}
	}

	cases := []struct {
		name string
		call func() error
		want error // nil: accepted
	}{
		// The Locker.
		{"nil locker", over(nil), httplock.ErrInvalid},
		{"locker of a failed construction: nil client", failed(nil), httplock.ErrInvalid},
		{"locker of a failed construction: typed-nil client", failed(nilClient), httplock.ErrInvalid},

		// The handler.
		{"middleware: nil handler", wrap(nil), httplock.ErrInvalid},
		{"middleware: nil HandlerFunc", wrap(nilFunc), httplock.ErrInvalid},
		{"middleware: nil *ServeMux", wrap(nilMux), httplock.ErrInvalid},
		{"middleware: handler", wrap(okHandler), nil},

		// The share window: Redis counts expiries in whole milliseconds.
		{"zero share window", with(httplock.WithShareWindow(0)), httplock.ErrInvalid},
		{"negative share window", with(httplock.WithShareWindow(-time.Second)), httplock.ErrInvalid},
		{"1ns share window", with(httplock.WithShareWindow(time.Nanosecond)), httplock.ErrInvalid},
		{"sub-ms share window", with(httplock.WithShareWindow(time.Millisecond - 1)), httplock.ErrInvalid},
		{"1ms share window", with(httplock.WithShareWindow(time.Millisecond)), nil},
		{"fractional-ms share window", with(httplock.WithShareWindow(1500 * time.Microsecond)), nil},
		{"huge share window", with(httplock.WithShareWindow(math.MaxInt64)), nil},

		// The TTL, a mutex lease.
		{"1µs TTL", with(httplock.WithTTL(time.Microsecond)), httplock.ErrInvalid},
		{"1ms TTL", with(httplock.WithTTL(time.Millisecond)), httplock.ErrInvalid},
		{"TTL below 10ms", with(httplock.WithTTL(10*time.Millisecond - 1)), httplock.ErrInvalid},
		{"negative TTL", with(httplock.WithTTL(-time.Second)), httplock.ErrInvalid},
		{"TTL above 1h", with(httplock.WithTTL(time.Hour + time.Millisecond)), httplock.ErrInvalid},
		{"overflowing TTL", with(httplock.WithTTL(math.MaxInt64)), httplock.ErrInvalid},
		{"10ms TTL", with(httplock.WithTTL(10 * time.Millisecond)), nil},
		{"1h TTL", with(httplock.WithTTL(time.Hour)), nil},

		// Local timeouts.
		{"negative wait", with(httplock.WithWait(-time.Second)), httplock.ErrInvalid},
		{"zero wait", with(httplock.WithWait(0)), httplock.ErrInvalid},
		{"1ns wait", with(httplock.WithWait(time.Nanosecond)), httplock.ErrInvalid},
		{"huge wait", with(httplock.WithWait(math.MaxInt64)), nil},
		{"negative handler timeout", with(httplock.WithTimeout(-1)), httplock.ErrInvalid},
		{"zero handler timeout", with(httplock.WithTimeout(0)), httplock.ErrInvalid},
		{"1ns handler timeout", with(httplock.WithTimeout(time.Nanosecond)), httplock.ErrInvalid},
		{"huge handler timeout", with(httplock.WithTimeout(math.MaxInt64)), nil},
		{"negative store timeout", with(httplock.WithStoreTimeout(-1)), httplock.ErrInvalid},
		{"zero store timeout", with(httplock.WithStoreTimeout(0)), httplock.ErrInvalid},
		{"sub-ms store timeout", with(httplock.WithStoreTimeout(time.Millisecond - 1)), httplock.ErrInvalid},
		{"1ms store timeout", with(httplock.WithStoreTimeout(time.Millisecond)), nil},

		// The body bound.
		{"zero max body", with(httplock.WithMaxBody(0)), httplock.ErrInvalid},
		{"negative max body", with(httplock.WithMaxBody(-1)), httplock.ErrInvalid},
		{"max body past 256 MiB", with(httplock.WithMaxBody(256<<20 + 1)), httplock.ErrInvalid},
		{"max body of MaxInt64", with(httplock.WithMaxBody(math.MaxInt64)), httplock.ErrInvalid},
		{"max body of 256 MiB", with(httplock.WithMaxBody(256 << 20)), nil},

		// Statuses.
		{"nil share-status function", with(httplock.WithShareStatus(nil)), httplock.ErrInvalid},
		{"panic status 42", with(httplock.WithPanicStatus(42)), httplock.ErrInvalid},
		{"negative panic status", with(httplock.WithPanicStatus(-1)), httplock.ErrInvalid},
		{"informational panic status", with(httplock.WithPanicStatus(http.StatusContinue)), httplock.ErrInvalid},
		{"panic status 199", with(httplock.WithPanicStatus(199)), httplock.ErrInvalid},
		{"panic status 600", with(httplock.WithPanicStatus(600)), httplock.ErrInvalid},
		{"panic status 999", with(httplock.WithPanicStatus(999)), httplock.ErrInvalid},
		{"panic status 200", with(httplock.WithPanicStatus(http.StatusOK)), nil},
		{"panic status 599", with(httplock.WithPanicStatus(599)), nil},
		{"no panic status", with(httplock.WithPanicStatus(0)), nil},

		// Header names.
		{"role header with a newline", with(httplock.WithRoleHeader("bad header\n")), httplock.ErrInvalid},
		{"role header with a space", with(httplock.WithRoleHeader("Role Header")), httplock.ErrInvalid},
		{"role header with a colon", with(httplock.WithRoleHeader("Role:")), httplock.ErrInvalid},
		{"role header not ASCII", with(httplock.WithRoleHeader("Rôle")), httplock.ErrInvalid},
		{"role header off", with(httplock.WithRoleHeader("")), nil},
		{"role header of token punctuation", with(httplock.WithRoleHeader("x-role_1!#$%&'*+.^`|~")), nil},
		{"empty vary header", with(httplock.WithVary("")), httplock.ErrInvalid},
		{"vary header with a space", with(httplock.WithVary("Accept-Encoding", "Accept Language")), httplock.ErrInvalid},
		{"vary header splitting", with(httplock.WithVary("Accept\r\nX-Injected: 1")), httplock.ErrInvalid},
		{"vary headers", with(httplock.WithVary("accept-encoding", "X-Tenant")), nil},
		{"credential header with a space", with(httplock.WithCredentialHeaders("X Api Key")), httplock.ErrInvalid},
		{"empty credential header", with(httplock.WithCredentialHeaders("")), httplock.ErrInvalid},
		{"credential headers", with(httplock.WithCredentialHeaders("x-api-key", "X-Auth-Token")), nil},
		{"unkeyed header not in the key", with(httplock.WithoutKeyHeaders("X-Forwarded-For")), httplock.ErrInvalid},
		{"unkeyed empty header", with(httplock.WithoutKeyHeaders("")), httplock.ErrInvalid},
		{"unkeyed default headers", with(httplock.WithoutKeyHeaders("host", "X-FORWARDED-HOST", "X-Forwarded-Proto", "forwarded")), nil},

		// The rest.
		{"prefix with a brace", with(httplock.WithPrefix("http{")), httplock.ErrInvalid},
		{"empty prefix", with(httplock.WithPrefix("")), nil},
		{"empty namespace", with(httplock.WithNamespace("")), nil},
		{"namespace", with(httplock.WithNamespace("billing {v2}\n")), nil},
		{"nil key function", with(httplock.WithKey(nil)), nil},
		{"nil option", with(nil), nil},
		{"nil tracer provider", with(httplock.WithTracerProvider(nil)), nil},
		{"typed-nil tracer provider", with(httplock.WithTracerProvider(nilTP)), nil},
		{"typed-nil meter provider", with(httplock.WithMeterProvider(nilMP)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := testutil.Safely(t, callBound, tc.call)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			if assert.ErrorIs(t, err, tc.want) {
				assert.True(t, strings.HasPrefix(err.Error(), "httplock: "), "%q names its package", err)
			}
		})
	}
	assert.Zero(t, redisHits.N(), "building the middleware reached Redis")
}

// TestRedisDown: with Redis unreachable a request goes to the origin, as
// its local flight's leader, rather than failing or panicking.
func TestRedisDown(t *testing.T) {
	l, redisHits := deadLocker(t)
	h := handlerOf(t, okHandler, l, httplock.WithWait(time.Second))
	rec := httptest.NewRecorder()
	require.NoError(t, testutil.Safely(t, callBound, func() error {
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/page", nil))
		return nil
	}))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Equal(t, "ok", rec.Body.String())
	assert.Equal(t, httplock.RoleLeader, rec.Header().Get(httplock.DefaultRoleHeader))
	assert.Positive(t, redisHits.N(), "the request did try Redis")

	// Redis is now marked down: the next request goes straight to the origin.
	n := redisHits.N()
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/page", nil))
	assert.Equal(t, "ok", rec.Body.String())
	assert.Equal(t, n, redisHits.N(), "a second request called Redis")
}

// A Redlock Locker is refused when the middleware is built: its shared
// responses would rest on one of the masters alone.
func TestRedlockLockerRefused(t *testing.T) {
	clients, _ := redistest.RedisN(t, 3)
	l := redistest.Redlock(t, clients)
	mw, err := httplock.New(l)
	assert.Nil(t, mw)
	assert.ErrorIs(t, err, httplock.ErrInvalid)
	assert.ErrorIs(t, err, mutex.ErrInvalid)
	assert.ErrorIs(t, err, httplock.ErrNeedsRedis)
	assert.ErrorContains(t, err, "backend lends no")
	assert.ErrorContains(t, err, "Redlock")
}
