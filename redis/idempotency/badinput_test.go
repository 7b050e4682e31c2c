package idempotency_test

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/idempotency"
)

// callBound is how long one bad-input call may take: it must fail at once.
const callBound = 5 * time.Second

var okHandler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })

// TestBadInput: every mistake in the configuration is refused by New with
// ErrInvalid, before any Redis call.
func TestBadInput(t *testing.T) {
	c, redisHits := redistest.DeadClient(t)
	l := redistest.Locker(t, c)
	var nilClient *redis.Client
	var nilFunc http.HandlerFunc
	var nilMux *http.ServeMux
	// A Ring moves a down shard's keys, record and fence, to another shard:
	// it cannot fence.
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": testutil.RefusedAddr(t)}})
	t.Cleanup(func() { _ = ring.Close() })
	ringLocker := redistest.Locker(t, ring)
	var nilTP *sdktrace.TracerProvider
	var nilMP *sdkmetric.MeterProvider

	with := func(opts ...idempotency.Option) func() error {
		return func() error {
			mw, err := idempotency.New(l, tenant, opts...)
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
		return func() error { _, err := idempotency.New(locker, tenant); return err }
	}
	// failed builds a Locker over c, which its construction refuses (with
	// mutex.ErrInvalid, returning no Locker), and hands idempotency what it
	// got, as a service that ignored the error would.
	failed := func(c redis.UniversalClient) func() error {
		return func() error {
			locker, err := redistest.NewLocker(c)
			if !errors.Is(err, mutex.ErrInvalid) || locker != nil {
				return fmt.Errorf("the Locker's construction: %v, %v", locker, err)
			}
			_, err = idempotency.New(locker, tenant)
			return err
		}
	}
	// wrap applies New's middleware to next: the panic it documents for a
	// nil handler comes back as the error; any other panic goes on.
	wrap := func(next http.Handler) func() (err error) {
		return func() (err error) {
			mw, err := idempotency.New(l, tenant)
			if err != nil {
				return err
			}
			defer func() {
				if v := recover(); v != nil {
					if e, ok := v.(error); ok && errors.Is(e, idempotency.ErrInvalid) {
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
		{"nil locker", over(nil), idempotency.ErrInvalid},
		{"locker of a failed construction: nil client", failed(nil), idempotency.ErrInvalid},
		{"locker of a failed construction: typed-nil client", failed(nilClient), idempotency.ErrInvalid},
		{"nil scope", func() error { _, err := idempotency.New(l, nil); return err }, idempotency.ErrInvalid},
		{"a Locker over a *redis.Ring", over(ringLocker), idempotency.ErrInvalid},
		{"middleware: nil handler", wrap(nil), idempotency.ErrInvalid},
		{"middleware: nil HandlerFunc", wrap(nilFunc), idempotency.ErrInvalid},
		{"middleware: nil *ServeMux", wrap(nilMux), idempotency.ErrInvalid},
		{"middleware: handler", wrap(okHandler), nil},

		{"no methods", with(idempotency.WithMethods()), idempotency.ErrInvalid},
		{"method with a space", with(idempotency.WithMethods("PO ST")), idempotency.ErrInvalid},
		{"methods", with(idempotency.WithMethods("POST", "PUT")), nil},
		{"max key length 0", with(idempotency.WithMaxKeyLen(0)), idempotency.ErrInvalid},
		{"max key length 1025", with(idempotency.WithMaxKeyLen(1025)), idempotency.ErrInvalid},
		{"max key length 1024", with(idempotency.WithMaxKeyLen(1024)), nil},
		{"fingerprint header with a space", with(idempotency.WithFingerprintHeaders("Content Type")), idempotency.ErrInvalid},
		{"fingerprint header splitting", with(idempotency.WithFingerprintHeaders("A\r\nB: 1")), idempotency.ErrInvalid},
		{"no fingerprint headers", with(idempotency.WithFingerprintHeaders()), nil},
		{"zero max request body", with(idempotency.WithMaxRequestBody(0)), idempotency.ErrInvalid},
		{"max request body past 256 MiB", with(idempotency.WithMaxRequestBody(256<<20 + 1)), idempotency.ErrInvalid},
		{"zero max body", with(idempotency.WithMaxBody(0)), idempotency.ErrInvalid},
		{"negative max body", with(idempotency.WithMaxBody(-1)), idempotency.ErrInvalid},
		{"max body of MaxInt64", with(idempotency.WithMaxBody(math.MaxInt64)), idempotency.ErrInvalid},
		{"max body of 256 MiB", with(idempotency.WithMaxBody(256 << 20)), nil},
		{"nil store-status function", with(idempotency.WithStoreStatus(nil)), idempotency.ErrInvalid},
		{"zero expiry", with(idempotency.WithExpiry(0)), idempotency.ErrInvalid},
		{"sub-second expiry", with(idempotency.WithExpiry(time.Second - 1)), idempotency.ErrInvalid},
		{"huge expiry", with(idempotency.WithExpiry(math.MaxInt64)), nil},
		{"TTL below 10ms", with(idempotency.WithTTL(10*time.Millisecond - 1)), idempotency.ErrInvalid},
		{"TTL above 1h", with(idempotency.WithTTL(time.Hour + time.Millisecond)), idempotency.ErrInvalid},
		{"negative TTL", with(idempotency.WithTTL(-time.Second)), idempotency.ErrInvalid},
		{"10ms TTL", with(idempotency.WithTTL(10 * time.Millisecond)), nil},
		{"zero store timeout", with(idempotency.WithStoreTimeout(0)), idempotency.ErrInvalid},
		{"sub-ms store timeout", with(idempotency.WithStoreTimeout(time.Millisecond - 1)), idempotency.ErrInvalid},
		{"unknown OnUnavailable", with(idempotency.WithOnUnavailable(7)), idempotency.ErrInvalid},
		{"pass-through", with(idempotency.WithOnUnavailable(idempotency.PassThrough)), nil},
		{"replay header with a colon", with(idempotency.WithReplayHeader("Replayed:")), idempotency.ErrInvalid},
		{"replay header off", with(idempotency.WithReplayHeader("")), nil},
		{"replay headers with a space", with(idempotency.WithReplayHeaders("Set Cookie")), idempotency.ErrInvalid},
		{"replay headers", with(idempotency.WithReplayHeaders("set-cookie", "Connection")), nil},
		{"sub-second retry-after", with(idempotency.WithRetryAfter(time.Second - 1)), idempotency.ErrInvalid},
		{"prefix with a brace", with(idempotency.WithPrefix("idem{")), idempotency.ErrInvalid},
		{"empty prefix", with(idempotency.WithPrefix("")), nil},
		{"nil option", with(nil), nil},
		{"typed-nil tracer provider", with(idempotency.WithTracerProvider(nilTP)), nil},
		{"typed-nil meter provider", with(idempotency.WithMeterProvider(nilMP)), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := testutil.Safely(t, callBound, tc.call)
			if tc.want == nil {
				assert.NoError(t, err)
				return
			}
			if assert.ErrorIs(t, err, tc.want) {
				assert.True(t, strings.HasPrefix(err.Error(), "idempotency: "), "%q names its package", err)
			}
		})
	}
	assert.Zero(t, redisHits.N(), "building the middleware reached Redis")
}

// A Redlock Locker is refused: records and their fences live in one Redis.
func TestRedlockLockerRefused(t *testing.T) {
	clients, _ := redistest.RedisN(t, 3)
	l := redistest.Redlock(t, clients)
	mw, err := idempotency.New(l, tenant)
	assert.Nil(t, mw)
	assert.ErrorIs(t, err, idempotency.ErrNeedsRedis)
	assert.ErrorIs(t, err, mutex.ErrInvalid)
	assert.ErrorContains(t, err, "the Locker's backend lends no Redis client")
	assert.ErrorContains(t, err, "Redlock")
}
