package httplock

import (
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// An Option configures the middleware. Nil options are ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	key          func(*http.Request) string
	vary         []string
	shareWindow  time.Duration
	waitTimeout  time.Duration
	lockAge      time.Duration
	handlerLimit time.Duration
	maxBody      int64
	shareAuth    bool
	shareStatus  func(int) bool
	panicStatus  int
	roleHeader   string
	prefix       string
	tp           trace.TracerProvider
	mp           metric.MeterProvider
	errs         []error
}

// Defaults, modelled on nginx's proxy_cache_lock (lock timeout and lock age 5 s).
const (
	DefaultShareWindow  = 2 * time.Second
	DefaultWaitTimeout  = 5 * time.Second
	DefaultLockAge      = 5 * time.Second
	DefaultHandlerLimit = 30 * time.Second
	DefaultMaxBody      = 1 << 20
	DefaultRoleHeader   = "Redfence-Role"
	DefaultPrefix       = "redfence:http:"
)

func newConfig(opts []Option) config {
	c := config{
		shareWindow:  DefaultShareWindow,
		waitTimeout:  DefaultWaitTimeout,
		lockAge:      DefaultLockAge,
		handlerLimit: DefaultHandlerLimit,
		maxBody:      DefaultMaxBody,
		shareStatus:  func(code int) bool { return code < 500 },
		roleHeader:   DefaultRoleHeader,
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

// WithKey adds a part to the collapse key, which is otherwise the method,
// path and query (plus WithVary's headers): for example a tenant header, so
// tenants never share, or r.Host for virtual hosting. fn runs for every eligible request and must be cheap.
func WithKey(fn func(r *http.Request) string) Option {
	return optionFunc(func(c *config) { c.key = fn })
}

// WithVary names request headers that always join the collapse key (for
// example Accept-Encoding when the origin compresses). Headers named in a
// response's Vary are honoured too, but only after the fact: a follower whose
// values differ from the leader's calls the origin itself.
func WithVary(headers ...string) Option {
	return optionFunc(func(c *config) {
		for _, h := range headers {
			c.vary = append(c.vary, http.CanonicalHeaderKey(h))
		}
	})
}

// WithShareWindow sets how long a response stays in Redis for requests that
// arrive after it was made (the waiting ones get it anyway). Default 2 s;
// must be positive.
func WithShareWindow(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.fail("share window %v must be positive", d)
		}
		c.shareWindow = d
	})
}

// WithWaitTimeout bounds how long a follower waits for the leader's response;
// then it calls the origin itself. Default 5 s; must be positive.
func WithWaitTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.fail("wait timeout %v must be positive", d)
		}
		c.waitTimeout = d
	})
}

// WithLockAge sets the leader's lock lease: a leader that has not produced
// its response after this long lets one more request through to the origin
// (nginx's proxy_cache_lock_age). Default 5 s; at least 1 ms.
func WithLockAge(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("lock age %v must be at least 1ms", d)
		}
		c.lockAge = d
	})
}

// WithHandlerTimeout bounds the leader's handler, which runs on a context
// detached from its own client's cancellation (others wait for its result).
// Default 30 s; must be positive.
func WithHandlerTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d <= 0 {
			c.fail("handler timeout %v must be positive", d)
		}
		c.handlerLimit = d
	})
}

// WithMaxBody sets the largest body shared; a response that grows past it is
// still sent to the leader's client but not shared. Default 1 MiB; must be
// positive.
func WithMaxBody(n int64) Option {
	return optionFunc(func(c *config) {
		if n <= 0 {
			c.fail("max body %d must be positive", n)
		}
		c.maxBody = n
	})
}

// WithShareAuthorized lets requests carrying Authorization or Cookie collapse
// (they bypass by default: their responses are usually per user). Use it
// with WithKey when the key must include the identity.
func WithShareAuthorized(on bool) Option {
	return optionFunc(func(c *config) { c.shareAuth = on })
}

// WithShareStatus decides which status codes are shared. Default: below
// 500, so a failing origin is retried by the followers, in parallel.
func WithShareStatus(fn func(status int) bool) Option {
	return optionFunc(func(c *config) {
		if fn == nil {
			c.fail("nil share-status function")
		}
		c.shareStatus = fn
	})
}

// WithPanicStatus makes followers answer with status (for example 502) when
// the leader's handler panics. Default 0: they call the origin themselves.
func WithPanicStatus(status int) Option {
	return optionFunc(func(c *config) {
		if status != 0 && (status < 100 || status > 999) {
			c.fail("panic status %d is not an HTTP status", status)
		}
		c.panicStatus = status
	})
}

// WithRoleHeader names the response header that says how a response was
// made: leader, shared or bypass. Default "Redfence-Role"; "" turns it off.
func WithRoleHeader(name string) Option {
	return optionFunc(func(c *config) { c.roleHeader = http.CanonicalHeaderKey(name) })
}

// WithPrefix sets the prefix of the Redis keys holding shared responses (the
// locks use the Locker's own prefix). Default "redfence:http:".
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) { c.prefix = p })
}

// WithTracerProvider sets where spans go. Default: the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets where metrics go. Default: the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}
