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
// Identical requests in one process join one flight; the flights' leaders
// TryLock the request key's lock (LockPrefix and a hash), and the holder
// calls the origin on a context detached from its client (WithTimeout),
// stores a response that may be shared for the share window in the Redis the
// Locker's backend lends (redisdriver.ClientOf), announces it and releases
// the lock; every waiting replica serves it. docs/httplock.md explains the
// flight, timeouts, Redis outages, goroutine ownership and the telemetry.
//
// # What is shared
//
// A shared response is a security boundary: it reaches only clients whose
// requests would have got the same answer. Requests share only when all of
// their key is equal:
//
//   - the method, TLS or not, the request target (path, query; the scheme if
//     absolute);
//   - Host, X-Forwarded-Host, X-Forwarded-Proto, Forwarded,
//     X-Forwarded-Scheme, X-Forwarded-Ssl, X-Forwarded-Port and
//     X-Forwarded-Prefix, unless WithoutKeyHeaders takes one out;
//   - WithNamespace's namespace, WithVary's headers, WithKey's part.
//
// Who the client is is not in the key. A request bypasses (calls the origin,
// nothing shared either way) when it carries credentials, unless
// WithShareAuthorized: Authorization, Proxy-Authorization, Cookie, X-Api-Key,
// X-Auth-Token, X-Forwarded-Client-Cert, X-Forwarded-User, X-Forwarded-Email,
// X-Auth-Request-User, X-Auth-Request-Email, X-Auth-Request-Access-Token,
// X-Amzn-Oidc-Data, X-Amzn-Oidc-Identity, Cf-Access-Jwt-Assertion,
// X-Goog-Iap-Jwt-Assertion, WithCredentialHeaders' names, or a TLS client
// certificate. It bypasses too when its method is not GET or HEAD, it has a
// body, it is conditional or partial (If-Match, If-None-Match,
// If-Modified-Since, If-Unmodified-Since, If-Range, Range), it stands for
// another URL or method (X-Original-Url, X-Rewrite-Url,
// X-Http-Method-Override, X-Http-Method, X-Method-Override), it asks for a
// reload (Cache-Control no-cache or max-age=0, Pragma no-cache), or Upgrade.
// An origin whose answer depends on anything else must say so: another
// header with WithVary, the client's address with WithKey, a credential
// header of its own with WithCredentialHeaders, two services under one Host
// on one Redis with WithNamespace.
//
// A response is shared only if its status passes WithShareStatus (default
// DefaultShareStatus; never 1xx, 206, 304, 412 or above 599) and, its
// headers read in canonical form with outer middleware's included, it sets
// no cookie (Set-Cookie, Set-Cookie2); has no Cache-Control no-store,
// private, unqualified no-cache, max-age=0 or s-maxage=0, no Pragma
// no-cache, no Expires in the past or that does not parse; no Vary: * and
// no trailers; a Content-Length that matches its body (HEAD, 204 and 304
// aside); a body within WithMaxBody; and no flush or hijack. It is kept for
// the share window, or its s-maxage, else max-age, when shorter. A follower
// is served it only if it sent the leader's values of every header the
// response's Vary names and its Accept-Encoding accepts the response's
// Content-Encoding (none accepts only the identity); else it calls the
// origin. Replayed is what the handler wrote (status, body, the headers it
// set), never headers outer middleware set before it nor hop-by-hop ones;
// of the request headers its Vary names, only a SHA-256 of the leader's
// values is stored. Nothing outlives its flight but a shared response.
//
// # Timeouts and failures
//
// A request waits at most WithWait from its arrival, then calls the origin;
// a leader still running after WithTTL loses its lease and the next request
// goes through. When a leader's answer turns out not to be shared, or its
// handler panics, the requests waiting on it call the origin at once (on a
// panic, answer WithPanicStatus if set); the panic goes on to the leader's
// own caller. A Redis call that fails or outlasts WithStoreTimeout marks
// Redis down: requests then collapse in-process only (one origin call per key
// per replica), storing nothing, until a background probe gets an answer.
// The role header (WithRoleHeader) says RoleLeader, RoleShared, RoleBypass
// or RolePanic. The middleware has nothing to close: its goroutines end with
// the Redis client's calls (see the guide).
//
// # Errors
//
// New reports every mistake in the configuration, wrapping ErrInvalid
// (mutex.ErrInvalid), before any I/O; each option states its default and
// range, and nil options are ignored. Serving returns no error:
//
//	situation                                            error
//	nil locker, a bad option                             ErrInvalid (New)
//	a Locker whose backend lends no Redis client         ErrNeedsRedis and ErrInvalid (New)
//	  (Redlock's, or one over etcd)
//	New's middleware applied to a nil handler            panics with an error matching ErrInvalid
//	  (typed nil included)
//	Redis unreachable or failing while serving           no error: collapsed in-process only (RoleLeader,
//	                                                       redis_down), on the span; Redis marked down
package httplock
