package httplock

import (
	"fmt"
	"net/http"
	"slices"
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

type config struct {
	key          func(*http.Request) string
	vary         []string        // WithVary's headers, canonical
	unkeyed      map[string]bool // default key headers taken out (WithoutKeyHeaders), canonical
	keyed        []string        // the headers in the key: the defaults left, then vary; set by newConfig
	namespace    string
	credentials  []string // canonical; the defaults first
	shareWindow  time.Duration
	wait         time.Duration
	ttl          time.Duration
	timeout      time.Duration
	storeTimeout time.Duration
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

// Defaults, modelled on nginx's proxy_cache_lock (its lock timeout, our
// wait, and its lock age, our TTL: 5 s).
const (
	DefaultShareWindow  = 2 * time.Second
	DefaultWait         = 5 * time.Second
	DefaultTTL          = 5 * time.Second
	DefaultTimeout      = 30 * time.Second
	DefaultStoreTimeout = time.Second
	DefaultMaxBody      = 1 << 20
	DefaultRoleHeader   = "Redfence-Role"
	DefaultPrefix       = "redfence:http:"
)

func newConfig(opts []Option) config {
	c := config{
		shareWindow:  DefaultShareWindow,
		wait:         DefaultWait,
		ttl:          DefaultTTL,
		timeout:      DefaultTimeout,
		storeTimeout: DefaultStoreTimeout,
		maxBody:      DefaultMaxBody,
		credentials:  defaultCredentials(),
		shareStatus:  DefaultShareStatus,
		roleHeader:   DefaultRoleHeader,
		prefix:       DefaultPrefix,
	}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	for _, name := range defaultKeyHeaders() {
		if !c.unkeyed[name] {
			c.keyed = append(c.keyed, name)
		}
	}
	for _, name := range c.vary {
		if !slices.Contains(c.keyed, name) {
			c.keyed = append(c.keyed, name)
		}
	}
	return c
}

func (c *config) fail(format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf(format, args...))
}

// WithKey adds a part to the collapse key (see the package documentation
// for the rest of it): whatever the origin's answer depends on that is not a
// request header, for example the client's network zone when the origin
// keeps an IP allow-list, so that requests from different zones never share.
// fn runs for every eligible request and must be cheap. Default, and for nil:
// no part.
func WithKey(fn func(r *http.Request) string) Option {
	return optionFunc(func(c *config) { c.key = fn })
}

// WithVary names request headers that join the collapse key, for an origin
// whose answer depends on them (say X-Tenant, or Accept-Language when it does
// not send Vary). Headers named in a response's Vary are honoured too, but
// only after the fact: a follower whose values differ from the leader's
// calls the origin itself; WithVary makes such requests collapse among
// themselves instead. Each name must be a valid header name (an RFC 9110
// token). Default: none.
func WithVary(headers ...string) Option {
	return optionFunc(func(c *config) {
		for _, h := range headers {
			if !httphdr.ValidName(h) {
				c.fail("vary header %q is not a valid header name", h)
				continue
			}
			c.vary = append(c.vary, http.CanonicalHeaderKey(h))
		}
	})
}

// defaultKeyHeaders are the request headers in the key unless
// WithoutKeyHeaders takes them out: the inputs an origin commonly builds
// URLs from (redirects, links, canonical addresses). Host stands for
// r.Host, which net/http takes from the Host header or the request line.
func defaultKeyHeaders() []string {
	return []string{"Host", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded",
		"X-Forwarded-Scheme", "X-Forwarded-Ssl", "X-Forwarded-Port", "X-Forwarded-Prefix"}
}

// WithoutKeyHeaders takes headers out of the default key, which holds Host,
// X-Forwarded-Host, X-Forwarded-Proto, Forwarded, X-Forwarded-Scheme,
// X-Forwarded-Ssl, X-Forwarded-Port and X-Forwarded-Prefix so that an
// origin building URLs from them never answers one client with another's
// host, scheme, port or path prefix. Take one out only when the origin's answer never depends on it:
// Host when replicas are reached under different names for one site, or
// Forwarded when a proxy writes each client's address into it (for=), which
// makes every client's key its own, and the origin reads neither its host
// nor its proto (otherwise key those with WithKey). Names are
// case-insensitive; a name outside those is an error, as it is not in
// the key to take out (WithVary adds headers). Default: none taken out.
func WithoutKeyHeaders(names ...string) Option {
	return optionFunc(func(c *config) {
		for _, name := range names {
			name = http.CanonicalHeaderKey(name)
			if !slices.Contains(defaultKeyHeaders(), name) {
				c.fail("%q is not in the default key (%s)", name, strings.Join(defaultKeyHeaders(), ", "))
				continue
			}
			if c.unkeyed == nil {
				c.unkeyed = map[string]bool{}
			}
			c.unkeyed[name] = true
		}
	})
}

// WithNamespace keeps this middleware's responses, locks and messages apart
// from those of middlewares with another namespace on the same Redis, even
// for identical requests under the same Host: for two services reached under
// one name (behind one gateway) that must never answer each other's
// requests. Services reached under different names are apart already, the
// Host being in the key. Default "": no namespace.
func WithNamespace(ns string) Option {
	return optionFunc(func(c *config) { c.namespace = ns })
}

// defaultCredentials are the request headers that carry credentials or an
// identity: by standard (RFC 9110 §11.6, RFC 6265), by common use (API
// keys), or as set by the authenticating proxies in front of an origin
// (oauth2-proxy, Envoy's client certificate, AWS ALB, Cloudflare Access,
// Google IAP). A request with any of them bypasses.
func defaultCredentials() []string {
	return []string{"Authorization", "Proxy-Authorization", "Cookie",
		"X-Api-Key", "X-Auth-Token", "X-Forwarded-Client-Cert", "X-Forwarded-User", "X-Forwarded-Email",
		"X-Auth-Request-User", "X-Auth-Request-Email", "X-Auth-Request-Access-Token",
		"X-Amzn-Oidc-Data", "X-Amzn-Oidc-Identity", "Cf-Access-Jwt-Assertion", "X-Goog-Iap-Jwt-Assertion"}
}

// WithCredentialHeaders names more request headers that carry credentials,
// for example X-Tenant-Token: a request carrying any of them bypasses, as
// one carrying a default credential header (see the package documentation)
// or a client certificate does (unless WithShareAuthorized). Each name must
// be a valid header name (an RFC 9110 token). Default: none beyond the
// defaults.
func WithCredentialHeaders(names ...string) Option {
	return optionFunc(func(c *config) {
		for _, name := range names {
			if !httphdr.ValidName(name) {
				c.fail("credential header %q is not a valid header name", name)
				continue
			}
			c.credentials = append(c.credentials, http.CanonicalHeaderKey(name))
		}
	})
}

// WithShareWindow sets how long a shared response stays in Redis for
// requests that arrive after it was made (the waiting ones get it anyway).
// Nothing else outlives its flight: after an answer that is not shared, or a
// panic, the next request leads a new flight. Default 2 s; at
// least 1 ms, Redis's unit, to which it is truncated.
func WithShareWindow(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("share window %v is below 1ms, the shortest Redis expiry", d)
		}
		c.shareWindow = d.Truncate(time.Millisecond)
	})
}

// WithWait bounds how long a request waits, from its arrival, for a
// leader's response; then it calls the origin itself (nginx's
// proxy_cache_lock_timeout). Default 5 s; at least 1 ms (less would not
// cover one Redis round trip, so every request would bypass).
func WithWait(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("wait %v is below 1ms", d)
		}
		c.wait = d
	})
}

// Bounds of WithTTL, the lease of a mutex.Lock: below mutex.MinTTL it would
// not outlast a round trip and the lock's drift margin; above an hour a
// stalled leader would hold its key long after every follower gave up
// waiting.
const (
	minTTL = mutex.MinTTL
	maxTTL = time.Hour
)

// WithTTL sets the lease of the leader's lock: a leader that has not
// produced its response after this long lets one more request through to
// the origin (nginx's proxy_cache_lock_age). Default 5 s; from 10 ms to
// 1 h, truncated to whole milliseconds.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < minTTL || d > maxTTL {
			c.fail("TTL %v outside [%v, %v]", d, minTTL, maxTTL)
		}
		c.ttl = d.Truncate(time.Millisecond)
	})
}

// WithTimeout bounds the leader's handler, which runs on a context
// detached from its own client's cancellation (others wait for its result).
// Default 30 s; at least 1 ms.
func WithTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("handler timeout %v is below 1ms", d)
		}
		c.timeout = d
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

// WithStoreTimeout bounds each Redis call made for a request. A call that
// fails or takes longer marks Redis down: from then on requests make no
// Redis call and collapse in-process only (one origin call per key per
// replica), until a probe in the background gets an answer again (see the
// package documentation). A SET of a shared response is given 1 ms more for
// every 64 KiB of it. Default 1 s; at least 1 ms. The bound holds whatever
// the client: with one that does not apply context deadlines to its
// sockets (go-redis's default: ContextTimeoutEnabled false) a request stops
// waiting for the call, which the client ends at its own ReadTimeout (see
// docs/httplock.md, "Goroutines and ownership").
func WithStoreTimeout(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < time.Millisecond {
			c.fail("store timeout %v is below 1ms", d)
		}
		c.storeTimeout = d
	})
}

// WithShareAuthorized lets requests carrying credentials (the default
// credential headers, WithCredentialHeaders' names, a TLS client
// certificate) collapse:
// they bypass by default, their responses being usually per user. Use it
// with WithKey or WithVary when the key must include the identity.
func WithShareAuthorized(on bool) Option {
	return optionFunc(func(c *config) { c.shareAuth = on })
}

// DefaultShareStatus reports whether status is one a cache may store
// without explicit freshness (RFC 9111 §4.2.2, "heuristically cacheable"):
// 200, 203, 204, 300, 301, 308, 404, 405, 410, 414 and 501. It is what
// httplock shares unless WithShareStatus says otherwise; it leaves out
// answers that are about one client (401, 403, 407, 429) and failures a
// follower should retry (5xx but 501).
func DefaultShareStatus(status int) bool {
	switch status {
	case 200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501:
		return true
	}
	return false
}

// WithShareStatus decides which status codes are shared. Default
// DefaultShareStatus; to share more, say 403 when a decision never depends
// on the client, extend it:
//
//	httplock.WithShareStatus(func(s int) bool { return httplock.DefaultShareStatus(s) || s == 403 })
//
// Whatever fn says, 206, 304 and 412 (answers to a condition or a range of
// one request), 1xx and statuses above 599 are never shared. nil is an
// error.
func WithShareStatus(fn func(status int) bool) Option {
	return optionFunc(func(c *config) {
		if fn == nil {
			c.fail("nil share-status function")
		}
		c.shareStatus = fn
	})
}

// WithPanicStatus makes the requests waiting on a leader whose handler
// panics answer with status (for example 502); requests that arrive later
// lead a flight of their own. Default 0: the waiting requests call the
// origin themselves, at once. Otherwise a final status, 200 to 599 (a 1xx is
// not an answer).
func WithPanicStatus(status int) Option {
	return optionFunc(func(c *config) {
		if status != 0 && (status < 200 || status > 599) {
			c.fail("panic status %d is not a final HTTP status (200-599)", status)
		}
		c.panicStatus = status
	})
}

// WithRoleHeader names the response header that says how a response was
// made: leader, shared, bypass or panic (the Role constants). Default
// "Redfence-Role"; "" turns it off. Any other name must be a valid header
// name (an RFC 9110 token): net/http would drop the header silently.
func WithRoleHeader(name string) Option {
	return optionFunc(func(c *config) {
		if name != "" && !httphdr.ValidName(name) {
			c.fail("role header %q is not a valid header name", name)
		}
		c.roleHeader = http.CanonicalHeaderKey(name)
	})
}

// WithPrefix sets the prefix of the Redis keys and channels holding shared
// responses (the locks are under the driver's own prefix,
// redisdriver.WithPrefix): where they live, for key-space layout or ACLs.
// It does not keep two services apart, their locks being under one driver
// prefix; WithNamespace does. Default "redfence:http:". As with
// redisdriver.WithPrefix, it must not contain '{' or '}', which would put
// every key in one Cluster hash slot.
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
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets where metrics go. Default, and for nil (typed or
// not): the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}
