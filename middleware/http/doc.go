// Package httplock is cluster-wide stampede protection for net/http: N
// identical requests arriving at M replicas at once cost one origin call, and
// every other client gets that response within about one Redis round trip of
// it being ready.
//
//	locker := mutex.New(redisClient)
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
// WithHandlerTimeout), so a leader whose client disconnects still finishes
// the work for the others. Its response is captured, stored in the Locker's
// Redis for the share window, the lock released and a "ready" message
// published. The other replicas subscribed after losing the TryLock; the one
// publication wakes them all at once, and each serves the stored response
// after one GET. Polling (another TryLock every 100–200 ms) is only the
// fallback for a lost message or a leader that stalled past the lock age.
//
// # What is shared
//
// Only GET and HEAD, and not requests carrying Authorization or Cookie
// (WithShareAuthorized changes that), Range or Upgrade: those bypass. The key
// is the method, the path and query, the WithVary headers and the WithKey
// part; not the Host, since replicas are reached under different names (add
// it with WithKey when one server hosts several sites). A response
// is not shared when it sets a cookie, says Cache-Control no-store or private,
// Vary: *, declares trailers, has a status WithShareStatus rejects (default:
// 5xx), grows past WithMaxBody (default 1 MiB; the leader's client still gets
// all of it), or when the handler flushes (streams) or hijacks. Then a short
// "not shareable" marker is left instead, so waiting requests go to the
// origin in parallel instead of queueing behind one another. Hop-by-hop
// headers are dropped; every follower gets its own copy of the headers. Headers
// named in a response's Vary are compared with the leader's request: a
// follower whose values differ calls the origin itself.
//
// # Timeouts and failures
//
// A follower waits at most WithWaitTimeout (default 5 s), then calls the
// origin itself. A leader that has not finished after WithLockAge (default
// 5 s, nginx's proxy_cache_lock_age) loses its lock's lease and the next
// request goes through. A leader whose handler panics: its own caller sees
// net/http's usual behaviour (the panic goes on), its followers are released
// at once and call the origin, or answer WithPanicStatus (say 502). When Redis
// is unreachable requests go to the origin unprotected rather than fail; the
// error is recorded on the request's span.
//
// The role header (default "Redfence-Role") says leader, shared, bypass or
// panic. Stale-while-revalidate is not implemented.
//
// The middleware starts no goroutines: all work happens in the requests'
// own.
//
// # Errors
//
// Every mistake in the configuration is reported by New (and NewHandler),
// wrapping ErrInvalid, before any I/O; serving never returns an error, and
// a Redis failure while serving is recorded on the request's span while the
// request goes to the origin:
//
//	situation                                              error
//	nil locker, or a Locker with a construction error      ErrInvalid (New)
//	a bad option, see the ranges below                     ErrInvalid (New)
//	NewHandler with a nil handler (typed nil included)     ErrInvalid
//	New's middleware applied to a nil handler              panics with an error matching ErrInvalid
//	Redis unreachable or failing while serving             no error: RoleBypass, recorded on the span
//
// The options' ranges (nil options are ignored; nil or typed-nil providers
// mean the globals):
//
//	WithShareWindow      at least 1 ms, truncated to whole ms (Redis's unit)
//	WithLockAge          10 ms to 1 h, truncated to whole ms (a mutex lease)
//	WithWaitTimeout      at least 1 ms
//	WithHandlerTimeout   at least 1 ms
//	WithMaxBody          1 byte to 256 MiB (one Redis string)
//	WithPanicStatus      0 (off) or 200 to 599
//	WithRoleHeader       "" (off) or a header name (an RFC 9110 token)
//	WithVary             header names (RFC 9110 tokens)
//	WithPrefix           no '{' or '}'
//	WithShareStatus      not nil
//	WithKey              nil means no extra key part
package httplock
