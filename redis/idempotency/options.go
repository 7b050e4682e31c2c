package idempotency

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/internal/httphdr"
	"github.com/redfence/redfence/mutex"
)

// An Option configures the middleware. Nil options are ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

// OnUnavailable says what a request gets when Redis fails or does not
// answer before its handler ran (WithOnUnavailable).
type OnUnavailable int

const (
	// Refuse answers 503 Service Unavailable (problem+json, Retry-After):
	// the handler does not run, so nothing can run twice. The default.
	Refuse OnUnavailable = iota
	// PassThrough runs the handler without protection: a retry may run it
	// again. For handlers that are idempotent on their own and prefer
	// availability.
	PassThrough
)

type config struct {
	methods      []string
	optional     bool
	maxKeyLen    int
	fpHeaders    []string // canonical
	fpBody       bool
	maxRequest   int64
	maxBody      int64
	storeStatus  func(int) bool
	expiry       time.Duration
	ttl          time.Duration
	storeTimeout time.Duration
	onDown       OnUnavailable
	replayHeader string
	replayable   map[string]bool // canonical names replayed though Set-Cookie or hop-by-hop
	retryAfter   time.Duration
	prefix       string
	tp           trace.TracerProvider
	mp           metric.MeterProvider
	errs         []error
}

// Defaults. The key length and expiry are Stripe's (keys up to 255
// characters, kept 24 hours), which the draft's examples follow.
const (
	DefaultMaxKeyLen      = 255
	DefaultExpiry         = 24 * time.Hour
	DefaultTTL            = 10 * time.Second
	DefaultStoreTimeout   = time.Second
	DefaultMaxBody        = 1 << 20
	DefaultMaxRequestBody = 1 << 20
	DefaultRetryAfter     = time.Second
	DefaultReplayHeader   = "Idempotent-Replayed"
	DefaultPrefix         = "redfence:idempotency:"
	// HeaderName is the request header the key comes in.
	HeaderName = "Idempotency-Key"
)

// Bounds of the options; see each option.
const (
	maxMaxKeyLen = 1024
	maxMaxBody   = 256 << 20 // one Redis string; Redis refuses 512 MB by default
	maxTTL       = time.Hour
)

func newConfig(opts []Option) config {
	c := config{
		methods:      []string{http.MethodPost, http.MethodPatch},
		maxKeyLen:    DefaultMaxKeyLen,
		fpHeaders:    []string{"Content-Type"},
		fpBody:       true,
		maxRequest:   DefaultMaxRequestBody,
		maxBody:      DefaultMaxBody,
		storeStatus:  DefaultStoreStatus,
		expiry:       DefaultExpiry,
		ttl:          DefaultTTL,
		storeTimeout: DefaultStoreTimeout,
		replayHeader: DefaultReplayHeader,
		replayable:   map[string]bool{},
		retryAfter:   DefaultRetryAfter,
		prefix:       DefaultPrefix,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	return c
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// WithMethods sets the methods the middleware applies to; others pass
// through untouched. Default POST and PATCH (PUT and DELETE are idempotent
// by definition). Each must be a token; at least one.
func WithMethods(methods ...string) Option {
	return optionFunc(func(c *config) {
		if len(methods) == 0 {
			c.fail("no methods")
		}
		c.methods = nil
		for _, m := range methods {
			if !httphdr.ValidName(m) {
				c.fail("method %q is not a token", m)
			}
			c.methods = append(c.methods, m)
		}
	})
}

// WithKeyOptional lets requests without a key through to the handler,
// unprotected. Default false: a request without one is answered 400.
func WithKeyOptional(on bool) Option {
	return optionFunc(func(c *config) { c.optional = on })
}

// WithMaxKeyLen sets the longest key accepted, in characters. Default 255;
// from 1 to 1024.
func WithMaxKeyLen(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 || n > maxMaxKeyLen {
			c.fail("max key length %d outside [1, %d]", n, maxMaxKeyLen)
		}
		c.maxKeyLen = n
	})
}

// WithFingerprintHeaders sets the request headers in the fingerprint,
// beside the method, path and query (and the body, WithFingerprintBody). A
// retry whose fingerprint differs from the first request's is answered
// 422. Default Content-Type; none when called without names. Each must be
// a valid header name.
func WithFingerprintHeaders(names ...string) Option {
	return optionFunc(func(c *config) {
		c.fpHeaders = nil
		for _, n := range names {
			if !httphdr.ValidName(n) {
				c.fail("fingerprint header %q is not a valid header name", n)
				continue
			}
			c.fpHeaders = append(c.fpHeaders, http.CanonicalHeaderKey(n))
		}
	})
}

// WithFingerprintBody says whether the request body is in the fingerprint.
// Default true: the body is read, up to WithMaxRequestBody, before the
// handler, which gets it back whole.
func WithFingerprintBody(on bool) Option {
	return optionFunc(func(c *config) { c.fpBody = on })
}

// WithMaxRequestBody bounds the request body read for the fingerprint; a
// larger one is answered 413 before the handler. Default 1 MiB; from 1
// byte to 256 MiB.
func WithMaxRequestBody(n int64) Option {
	return optionFunc(func(c *config) {
		if n < 1 || n > maxMaxBody {
			c.fail("max request body %d outside [1, %d]", n, maxMaxBody)
		}
		c.maxRequest = n
	})
}

// WithMaxBody sets the largest response body stored. A response that grows
// past it, or is flushed (streamed) or hijacked, goes to its client as it
// is written and is not stored: the key's record says so, and retries are
// answered 409 (ProblemNotStored) until it expires. Default 1 MiB; from
// 1 byte to 256 MiB.
func WithMaxBody(n int64) Option {
	return optionFunc(func(c *config) {
		if n < 1 || n > maxMaxBody {
			c.fail("max body %d outside [1, %d]", n, maxMaxBody)
		}
		c.maxBody = n
	})
}

// DefaultStoreStatus stores every final status, 5xx included: the draft
// replays "the result of the first request, success or error".
func DefaultStoreStatus(status int) bool { return status >= 200 && status <= 599 }

// WithStoreStatus decides which statuses are stored. A response whose
// status is not releases the key: the record is deleted, and a retry runs
// the handler again (say, for 503 from an overloaded dependency). Statuses
// outside 200-599 are never stored. nil is an error.
func WithStoreStatus(fn func(status int) bool) Option {
	return optionFunc(func(c *config) {
		if fn == nil {
			c.fail("nil store-status function")
		}
		c.storeStatus = fn
	})
}

// WithExpiry sets how long a key's record is kept after its first request
// arrived, and a stored response after it was stored. Default 24 h; at
// least 1 s, truncated to whole milliseconds.
func WithExpiry(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Second {
			c.fail("expiry %v is below 1s", d)
		}
		c.expiry = d.Truncate(time.Millisecond)
	})
}

// WithTTL sets the lease of the lock the running request holds on its
// key, renewed every third of it while the handler runs. A request that
// stalls past it (its renewals fail) lets a retry run; its own result is
// then refused. Default 10 s; from 10 ms to 1 h, truncated to whole
// milliseconds.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < mutex.MinTTL || d > maxTTL {
			c.fail("TTL %v outside [%v, %v]", d, mutex.MinTTL, maxTTL)
		}
		c.ttl = d.Truncate(time.Millisecond)
	})
}

// WithStoreTimeout bounds each Redis call, and before the handler the
// request's deadline bounds it too. Default 1 s; at least 1 ms.
func WithStoreTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("store timeout %v is below 1ms", d)
		}
		c.storeTimeout = d
	})
}

// WithOnUnavailable says what a request gets when Redis fails or does not
// answer before its handler ran: Refuse (503, the default) or PassThrough.
func WithOnUnavailable(mode OnUnavailable) Option {
	return optionFunc(func(c *config) {
		if mode != Refuse && mode != PassThrough {
			c.fail("unknown OnUnavailable %d", mode)
		}
		c.onDown = mode
	})
}

// WithReplayHeader names the response header that marks a replay (value
// "true"). Default "Idempotent-Replayed", as Stripe's; "" turns it off.
func WithReplayHeader(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" && !httphdr.ValidName(name) {
			c.fail("replay header %q is not a valid header name", name)
		}
		c.replayHeader = http.CanonicalHeaderKey(name)
	})
}

// WithReplayHeaders lets headers be stored and replayed that never are by
// default: Set-Cookie, Set-Cookie2 and the hop-by-hop headers. Replaying a
// cookie hands a session to whoever retries with the key in the same scope;
// name it only when that is meant. Each must be a valid header name.
func WithReplayHeaders(names ...string) Option {
	return optionFunc(func(c *config) {
		for _, n := range names {
			if !httphdr.ValidName(n) {
				c.fail("replay header %q is not a valid header name", n)
				continue
			}
			c.replayable[http.CanonicalHeaderKey(n)] = true
		}
	})
}

// WithRetryAfter sets the Retry-After of a 409 (a request with the key is
// running) and of a 503. Default 1 s; from 1 s, in whole seconds.
func WithRetryAfter(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Second {
			c.fail("retry-after %v is below 1s", d)
		}
		c.retryAfter = d.Truncate(time.Second)
	})
}

// WithPrefix sets the prefix of the records' Redis keys (the locks use the
// driver's, redisdriver.WithPrefix; the fences redisfence's). Default
// "redfence:idempotency:"; it must not contain '{' or '}', which would
// move a record out of its fence's Cluster hash slot.
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) {
		if strings.ContainsAny(p, "{}") {
			c.fail("prefix %q contains a brace", p)
		}
		c.prefix = p
	})
}

// WithTracerProvider sets where spans go. Default, and for nil (typed nil
// included): the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets where metrics go. Default, and for nil (typed or
// not): the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}
