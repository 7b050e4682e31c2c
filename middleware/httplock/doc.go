// Package httplock is cluster-wide stampede protection for net/http: N
// identical requests arriving at M replicas at once cost one origin call, and
// every other client gets that response within about one Redis round trip of
// it being ready.
//
//	d, err := redisdriver.New(redisClient)
//	...
//	locker, err := mutex.New(d)
//	...
//	mw, err := httplock.New(locker, httplock.WithShareWindow(2*time.Second))
//	if err != nil { ... }             // bad configuration is reported here
//	http.ListenAndServe(addr, mw(originHandler))
//
// # Two levels of collapse
//
// Inside one process, identical requests join one flight and only its leader
// talks to Redis. Across processes, the flight leaders look for a response
// another replica already shared; if there is none, they TryLock the key's
// mutex.Lock. The one that holds it calls the origin: the handler runs on a
// context detached from its own client's cancellation (bounded by
// WithTimeout), so a leader whose client disconnects still finishes
// the work for the others. Its response is captured and, if it may be
// shared, stored for the share window in the Redis whose client the
// Locker's backend lends (redisdriver.ClientOf); then a message
// is published and the lock released. The other replicas subscribed after
// losing the TryLock; the one publication wakes them all at once, and each
// serves the stored response after one GET, or, told there is nothing to
// share, calls the origin. Polling (another TryLock every 100–200 ms) is
// only the fallback for a lost message or a leader that stalled past its
// lock's lease (WithTTL).
//
// # What is shared
//
// A shared cache is a security boundary: a response may only reach clients
// whose requests would have got the same answer. httplock decides so from
// the request, before any flight, and from the response:
//
//	In the key (requests that differ here never share)
//	  method; TLS or not; request target: path, query (scheme if absolute)   always
//	  Host, X-Forwarded-Host, X-Forwarded-Proto, Forwarded,                   unless WithoutKeyHeaders
//	    X-Forwarded-Scheme, X-Forwarded-Ssl, X-Forwarded-Port,
//	    X-Forwarded-Prefix
//	  the namespace, WithVary's headers, the WithKey part                     when set
//	Bypass (the request calls the origin; nothing shared either way)
//	  a method other than GET and HEAD                                        method
//	  a request body (Content-Length not 0, or Transfer-Encoding)             body
//	  Authorization, Proxy-Authorization, Cookie, X-Api-Key, X-Auth-Token,    credentials,
//	    X-Forwarded-Client-Cert, X-Forwarded-User, X-Forwarded-Email,           unless
//	    X-Auth-Request-User, X-Auth-Request-Email,                              WithShareAuthorized
//	    X-Auth-Request-Access-Token, X-Amzn-Oidc-Data, X-Amzn-Oidc-Identity,
//	    Cf-Access-Jwt-Assertion, X-Goog-Iap-Jwt-Assertion,
//	    WithCredentialHeaders', a TLS client certificate
//	  If-Match, If-None-Match, If-Modified-Since, If-Unmodified-Since,       conditional
//	    If-Range, Range (conditional and partial requests)
//	  X-Original-Url, X-Rewrite-Url, X-Http-Method-Override, X-Http-Method,  override
//	    X-Method-Override (another URL or method than the key's)
//	  Cache-Control no-cache or max-age=0, Pragma no-cache (a reload)        reload
//	  Upgrade                                                                upgrade
//	What the origin's answer must not depend on, unless you say so
//	  another request header (X-Tenant, Accept-Language without Vary)         WithVary(name)
//	  something else (the client's address: IP allow-lists, geo)             WithKey(fn)
//	  a credential in a header of your own (X-Tenant-Token)                   WithCredentialHeaders(name)
//	  nothing but the path, yet two services share a Host and a Redis         WithNamespace(name)
//
// The bypass reasons are the span's redfence.http.bypass attribute. One more
// value, redis_down, is set on a leader that skipped only the cross-replica
// step (see "Redis down or hung").
//
// A response is never shared when (checked on its headers in canonical
// form, values of names that differ in case merged, outer middleware's
// headers included):
//
//	its status is not one DefaultShareStatus allows (those RFC 9111 lets a cache store
//	  heuristically: 200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501); WithShareStatus
//	  changes that, but never for 1xx, 206, 304, 412 or above 599
//	it sets a cookie (Set-Cookie, Set-Cookie2)
//	Cache-Control no-store, private, no-cache (unqualified), max-age=0 or s-maxage=0;
//	  Pragma no-cache; an Expires in the past or that does not parse
//	Vary: *, or trailers (declared, or http.TrailerPrefix headers)
//	a Content-Length that does not match the body (unless HEAD, 204 or 304)
//	a body past WithMaxBody (default 1 MiB; the leader's client still gets all of it)
//	the handler flushes (streams) or hijacks
//
// A shared response is kept for the share window, or for its s-maxage, or
// else its max-age, when shorter.
//
// What is stored and replayed is what the handler wrote: its status, its
// body (none for HEAD), and the headers it set or changed. Headers set on
// the ResponseWriter before httplock ran (a request id from outer
// middleware) stay with the leader's own response; every follower keeps its
// own. Hop-by-hop headers are dropped, and every follower gets its own copy
// of the headers and body. Of the request headers the response varies on,
// only a SHA-256 of the leader's values is stored.
//
// The leader's response is held back from its own client until the others
// have it, so that a client slow to read does not hold them up: while it
// may be shared, it is only buffered; it is stored and announced, then sent
// to the leader's client. One that may not be shared (by its status or
// headers, past the max body, or flushed) goes to the leader's client as it
// is written.
//
// A follower is served the response only when it sent the leader's values
// for every header the response's Vary names, and its Accept-Encoding
// accepts the response's Content-Encoding, whether or not the origin said
// Vary: Accept-Encoding (a request without Accept-Encoding accepts only the
// identity). Otherwise it calls the origin itself.
//
// Nothing outlives its flight but a shared response. An answer that is not
// shared releases the requests waiting on that leader, which call the origin
// at once, in parallel; the next request leads a new flight.
//
// # Timeouts and failures
//
// A request waits at most WithWait (default 5 s, nginx's
// proxy_cache_lock_timeout) from its arrival, however many leaders it waits
// on, then calls the origin itself. A leader that has not finished after
// WithTTL (default 5 s, nginx's proxy_cache_lock_age) loses its lock's
// lease and the next request goes through. A leader whose handler panics: its own caller sees
// net/http's usual behaviour (the panic goes on); the requests waiting on it
// are released at once and call the origin, or answer WithPanicStatus (say
// 502). Requests that arrive later lead a flight of their own. A leader
// whose response turns out not to be shared while its handler still runs
// (its status or headers, past WithMaxBody, a flush or a hijack) releases
// its waiters then, not when the handler returns: a stream, a long poll or
// a large download holds no one up.
//
// The role header (default "Redfence-Role") says leader, shared, bypass or
// panic. Stale-while-revalidate is not implemented.
//
// # Redis down or hung
//
// Redis is up, or marked down. A Redis call made for a request that fails,
// or gets no answer within WithStoreTimeout (default 1 s), marks it down;
// that request then calls the origin as the leader of its local flight. From
// then on requests make no Redis call: identical requests still collapse
// in-process, one origin call per key per replica, the followers served the
// leader's response as when Redis is up (role shared), the leader marked
// leader with redfence.http.bypass=redis_down on its span. Nothing is stored
// or announced, so each replica makes its own origin call. A probe in the
// background, one PING about once a second (jittered), looks for Redis
// again; when it answers, the requests that follow use it. What httplock
// adds to a request's latency, in each state:
//
//	Up, leader               about 6 Redis round trips (GET, TryLock, GET; SET, PUBLISH, unlock)
//	Up, follower             the wait for the leader, then 1 GET
//	Up, within the window    1 GET
//	Bypass (ineligible)      none
//	Becoming down            the requests already calling Redis: up to WithStoreTimeout per
//	                         call (a SET, plus 1 ms per 64 KiB of the response), and one failed
//	                         call is enough, whatever the client's ReadTimeout. Their local
//	                         followers wait for them, as when Redis is up
//	Down, leader             none: no Redis call on the request's path
//	Down, follower           the wait for its replica's leader, none for Redis
//	Coming back              none: the probe runs beside the requests, which use Redis
//	                         again once it has been answered
//
// Ownership: with a client that applies context deadlines to its sockets
// (go-redis's ContextTimeoutEnabled, which the examples set), while Redis
// is up, or no request comes, the middleware runs no goroutine. With one
// that does not (go-redis's default), each GET, SET and PUBLISH runs on a
// goroutine of its own, which the request stops waiting for at
// WithStoreTimeout, as mutex does with its calls: on a hung server it lives
// on until the client's ReadTimeout, and Redis is then marked down, so
// only the calls in flight when it hung are left so. While Redis is down,
// a request that finds a probe due starts one on a goroutine of its own and
// does not wait for it. The probe's PING is bounded by WithStoreTimeout, or
// by the client's ReadTimeout as above; a probe still running twice
// WithStoreTimeout after it started is counted as lost (its answer ignored)
// and the next may start, but never while another lost one runs: at most
// two probe goroutines per middleware, the current one and one lost. There
// is nothing to close: closing the Redis client (the one the driver was
// given, which stays the caller's) ends running probes and calls at once.
//
// # Telemetry
//
// Spans and instruments come from WithTracerProvider and WithMeterProvider
// (default: otel's globals), under the instrumentation scope
// "github.com/redfence/redfence/middleware/httplock" with the module's version.
// The Locker's own spans and instruments are package mutex's.
//
//	span               kind      attributes
//	redfence.httplock  INTERNAL  http.request.method, url.path, redfence.http.role (leader,
//	                               shared, bypass, panic), redfence.wait (seconds from arrival
//	                               to serving), redfence.http.bypass (method, body, credentials,
//	                               conditional, override, reload, upgrade; redis_down on a
//	                               leader that collapsed in-process only), redfence.key (the
//	                               request key's lock, "httplock:" and a hash, as mutex's
//	                               spans name it; not on a bypass); Redis errors as exception
//	                               events. It wraps the user's handler: the SERVER span is
//	                               otelhttp's.
//
//	instrument                   kind     unit       attributes
//	redfence.http.origin_calls   counter  {request}  none: requests that called the handler
//	redfence.http.collapsed      counter  {request}  none: requests served another's response
//
// # Errors
//
// Every mistake in the configuration is reported by New, wrapping
// ErrInvalid (mutex.ErrInvalid), before any I/O; serving never returns an error, and
// a Redis failure while serving is recorded on the request's span while the
// request goes to the origin:
//
//	situation                                              error
//	nil locker                                             ErrInvalid (New)
//	a Locker whose backend lends no Redis client:          ErrNeedsRedis and ErrInvalid (New)
//	  Redlock's, or one over etcd
//	a bad option, see the ranges below                     ErrInvalid (New)
//	New's middleware applied to a nil handler (typed nil   panics with an error matching ErrInvalid
//	  included)
//	Redis unreachable or failing while serving             no error: collapsed in-process only (RoleLeader,
//	                                                         redis_down), recorded on the span, Redis marked down
//
// The options' ranges (nil options are ignored; nil or typed-nil providers
// mean the globals):
//
//	WithShareWindow        at least 1 ms, truncated to whole ms (Redis's unit)
//	WithTTL                10 ms to 1 h, truncated to whole ms (a mutex lease)
//	WithWait               at least 1 ms
//	WithTimeout            at least 1 ms
//	WithStoreTimeout       at least 1 ms
//	WithMaxBody            1 byte to 256 MiB (one Redis string)
//	WithPanicStatus        0 (off) or 200 to 599
//	WithRoleHeader         "" (off) or a header name (an RFC 9110 token)
//	WithVary               header names (RFC 9110 tokens)
//	WithCredentialHeaders  header names (RFC 9110 tokens)
//	WithoutKeyHeaders      the default key headers above (any case)
//	WithNamespace          any string
//	WithPrefix             no '{' or '}'
//	WithShareStatus        not nil
//	WithKey                nil means no extra key part
package httplock
