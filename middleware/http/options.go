package httplock

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex"
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
// tenants never share, or r.Host for virtual hosting. fn runs for every
// eligible request and must be cheap. Default, and for nil: no part.
func WithKey(fn func(r *http.Request) string) Option {
	return optionFunc(func(c *config) { c.key = fn })
}

// WithVary names request headers that always join the collapse key (for
// example Accept-Encoding when the origin compresses). Headers named in a
// response's Vary are honoured too, but only after the fact: a follower whose
// values differ from the leader's calls the origin itself. Each name must be
// a valid header name (an RFC 9110 token).
func WithVary(headers ...string) Option {
	return optionFunc(func(c *config) {
		for _, h := range headers {
			if !validHeaderName(h) {
				c.fail("vary header %q is not a valid header name", h)
				continue
			}
			c.vary = append(c.vary, http.CanonicalHeaderKey(h))
		}
	})
}

// WithShareWindow sets how long a response stays in Redis for requests that
// arrive after it was made (the waiting ones get it anyway). Default 2 s; at
// least 1 ms, Redis's unit, to which it is truncated.
func WithShareWindow(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("share window %v is below 1ms, the shortest Redis expiry", d)
		}
		c.shareWindow = d.Truncate(time.Millisecond)
	})
}

// WithWaitTimeout bounds how long a follower waits for the leader's response;
// then it calls the origin itself. Default 5 s; at least 1 ms (less would not
// cover one Redis round trip, so every request would bypass).
func WithWaitTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("wait timeout %v is below 1ms", d)
		}
		c.waitTimeout = d
	})
}

// Bounds of WithLockAge, the lease of a mutex.Lock: below mutex.MinTTL it would not
// outlast a round trip and the lock's drift margin; above an hour a stalled
// leader would hold its key long after every follower gave up waiting.
const (
	minLockAge = mutex.MinTTL
	maxLockAge = time.Hour
)

// WithLockAge sets the leader's lock lease: a leader that has not produced
// its response after this long lets one more request through to the origin
// (nginx's proxy_cache_lock_age). Default 5 s; from 10 ms to 1 h, truncated
// to whole milliseconds.
func WithLockAge(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < minLockAge || d > maxLockAge {
			c.fail("lock age %v outside [%v, %v]", d, minLockAge, maxLockAge)
		}
		c.lockAge = d.Truncate(time.Millisecond)
	})
}

// WithHandlerTimeout bounds the leader's handler, which runs on a context
// detached from its own client's cancellation (others wait for its result).
// Default 30 s; at least 1 ms.
func WithHandlerTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("handler timeout %v is below 1ms", d)
		}
		c.handlerLimit = d
	})
}

// maxMaxBody bounds WithMaxBody: a shared body is one Redis string, and
// Redis refuses strings over 512 MB (proto-max-bulk-len) by default.
const maxMaxBody = 256 << 20

// WithMaxBody sets the largest body shared; a response that grows past it is
// still sent to the leader's client but not shared. Default 1 MiB; from 1
// byte to 256 MiB.
func WithMaxBody(n int64) Option {
	return optionFunc(func(c *config) {
		if n <= 0 || n > maxMaxBody {
			c.fail("max body %d outside [1, %d]", n, maxMaxBody)
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
// 500, so a failing origin is retried by the followers, in parallel. nil is
// an error.
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
// Otherwise a final status, 200 to 599 (a 1xx is not an answer).
func WithPanicStatus(status int) Option {
	return optionFunc(func(c *config) {
		if status != 0 && (status < 200 || status > 599) {
			c.fail("panic status %d is not a final HTTP status (200-599)", status)
		}
		c.panicStatus = status
	})
}

// WithRoleHeader names the response header that says how a response was
// made: leader, shared or bypass. Default "Redfence-Role"; "" turns it off.
// Any other name must be a valid header name (an RFC 9110 token): net/http
// would drop the header silently.
func WithRoleHeader(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" && !validHeaderName(name) {
			c.fail("role header %q is not a valid header name", name)
		}
		c.roleHeader = http.CanonicalHeaderKey(name)
	})
}

// WithPrefix sets the prefix of the Redis keys and channels holding shared
// responses (the locks use the Locker's own prefix). Default
// "redfence:http:". As with mutex.WithPrefix, it must not contain '{' or '}',
// which would put every key in one Cluster hash slot.
func WithPrefix(p string) Option {
	return optionFunc(func(c *config) {
		if strings.ContainsAny(p, "{}") {
			c.fail("prefix %q contains a brace", p)
		}
		c.prefix = p
	})
}

// WithTracerProvider sets where spans go. Default, and for nil (a typed nil
// such as a nil *sdktrace.TracerProvider included): the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) {
		if !isNil(tp) {
			c.tp = tp
		}
	})
}

// WithMeterProvider sets where metrics go. Default, and for nil (typed or
// not): the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) {
		if !isNil(mp) {
			c.mp = mp
		}
	})
}

// validHeaderName reports whether name is an RFC 9110 token, the grammar of
// a field name: what httpguts.ValidHeaderFieldName checks, without x/net.
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// isNil reports whether v is nil or an interface holding a nil pointer or
// func, whose methods would panic on first use.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch rv := reflect.ValueOf(v); rv.Kind() {
	case reflect.Pointer, reflect.Func:
		return rv.IsNil()
	}
	return false
}
