// Package idempotency is the Idempotency-Key header for net/http
// (draft-ietf-httpapi-idempotency-key-header-07, as Stripe's API behaves):
// a POST retried by a client, a proxy or a mobile network runs once across
// every replica sharing a Redis, every retry gets the first one's answer,
// and a first attempt that stalled past its lease can never overwrite the
// answer a retry made meanwhile.
//
//	d, err := redisdriver.New(redisClient)
//	...
//	locker, err := mutex.New(d)
//	...
//	mw, err := idempotency.New(locker, func(r *http.Request) string { return principal(r) })
//	if err != nil { ... }             // bad configuration is reported here
//	mux.Handle("POST /payments", mw(payHandler))
//
// # The key
//
// Idempotency-Key is an RFC 8941 String: Idempotency-Key: "8e03978e-40d5".
// Published format: 1 to 255 printable ASCII characters (WithMaxKeyLen), in
// one field, without parameters; a bare token (Idempotency-Key: 8e03978e)
// only with WithBareToken. Published expiry: a key's record is kept 24 h
// (WithExpiry) after its first request, a stored response 24 h after it was
// stored; after that the key is new again.
//
// A record is keyed by the request's scope (the principal or tenant the
// application's function names), its method, its route and its key, each
// length-prefixed into one SHA-256. The route is r.Pattern from a Go 1.22
// ServeMux, else the path, or WithRoute's; the path is the one the client
// sent (r.RequestURI's), and a pattern is kept with what http.StripPrefix
// removed, so /billing/orders and /shipping/orders behind StripPrefix
// before one "POST /orders" are two routes. Keys are never shared across
// scopes, so a key guessed or reused by another client runs that client's
// request, with no hint the key exists elsewhere. A scope of "" is refused (403).
//
// The record holds the first request's fingerprint: SHA-256 of its method,
// path (as sent, before any StripPrefix), query, WithFingerprintHeaders'
// headers (default Content-Type) and, unless WithFingerprintBody(false),
// its body. The body is read before the handler, up to WithMaxRequestBody
// (default 1 MiB; larger is 413), and given back to the handler whole.
//
// # Decisions
//
// Only WithMethods' methods are covered (default POST and PATCH); others
// pass through untouched. In the order the checks are made:
//
//	key invalid                                          400 problem (ProblemKeyInvalid)
//	key missing                                          400 problem (ProblemKeyMissing); passed through with WithKeyOptional
//	scope ""                                             403 problem (ProblemNoScope)
//	body past WithMaxRequestBody                         413 problem (ProblemTooLarge)
//	body unreadable (the client broke off)               400 problem (ProblemBody)
//	the key's record has another fingerprint             422 problem (ProblemMismatch), whether its request runs or finished
//	a response is stored                                 replayed: status, the handler's headers, body; Idempotent-Replayed: true
//	its response was not stored (too large, streamed)    409 problem (ProblemNotStored), no Retry-After
//	a request with the key runs (holds the lock)         409 problem (ProblemInProgress), Retry-After (WithRetryAfter, 1 s)
//	otherwise                                            the handler runs
//
// Every refusal is application/problem+json (RFC 9457), its type one of
// the Problem constants, and none of them leaves anything in Redis: a
// record is made only once the key, scope and body passed. 422 wins over
// 409: the first request's fingerprint is written (GET, else SET, in one
// script) before any handler runs, so a different payload is told 422
// while it runs.
//
// # Running once
//
// The request that runs the handler holds a mutex lock on the record
// (lease WithTTL, default 10 s, renewed every third of it while the
// handler runs). The handler's context carries the request's values but
// not its cancellation or deadline: a client that times out or hangs up
// is the case the key exists for, so the attempt runs to its end and the
// retry gets its result (as with Stripe), instead of a failure caused by
// the client's leaving, stored for 24 h. It ends only when the lock is
// lost (context.Cause: mutex.ErrLockLost), when a retry may run; a handler
// bounds its own work (context.WithTimeout), since the lock is renewed as
// long as it runs. Before
// the handler, it claims the record through a redisfence Fence with the
// lock's token; after, it writes the outcome through the fence with the
// same token, then releases the lock, then sends the response to its
// client: the client only ever sees an answer a retry will see too. If it
// stalled past its lease (its renewals failed) and a retry took the lock,
// the retry's claim recorded a higher token, and the stalled request's
// write is refused: the retry's result is kept, and the stalled request's
// client is given what the record holds (the retry's response, or 409
// while that runs). So is it when its write failed and its lease had run
// out (whether the write was applied is unknown, and a retry may have taken
// over), or 503 (ProblemUnavailable) when the record cannot be read
// either. A handler that panics stores nothing and releases the lock: a
// retry runs the handler again, as after a crash.
//
// What is stored: the response of every handler that ran, 5xx included
// (WithStoreStatus: a status it rejects deletes the record, so a retry
// runs again). Its status, body and the header values the handler added
// are stored, never a value the ResponseWriter had before the handler ran
// (outer middleware's: a request id, a session), even in a field the
// handler added to, nor Set-Cookie, Set-Cookie2 or hop-by-hop headers,
// unless WithReplayHeaders names them. A replay appends the values to the
// retry's own where the handler appended them, and sets the field where
// the handler replaced it. Trailers (declared in Trailer, or set with
// http.TrailerPrefix after the body) reach the first client only: they are
// not stored, and a replay has none.
// Larger or streamed responses: a body past WithMaxBody (default 1 MiB),
// a Flush or a Hijack sends the response to its client as it is written,
// and the record then says it was processed but not stored: retries get
// 409 (ProblemNotStored) until the key expires, and the handler never
// runs again for that key. Nothing is stored for a request refused before
// the handler.
//
// # Redis down
//
// Each Redis call is bounded by WithStoreTimeout (default 1 s), and before
// the handler by the request's own deadline too, with any go-redis client
// (internal/bounded: a client without ContextTimeoutEnabled is not waited
// for past the deadline). A call that fails before the handler ran gives
// the answer WithOnUnavailable sets: 503 problem (ProblemUnavailable) with
// Retry-After (Refuse, the default), or the handler unprotected
// (PassThrough; never for a request whose context had ended before the
// middleware ran or whose client went away: it gets the 503, for its key
// may hold a response). After
// the handler ran, a failed write leaves the response unstored (the client
// gets it; a retry runs the handler again once the lease ends), unless the
// lease had run out: then it is withheld, as from a stalled request. Unlike
// httplock, there is no down state: every request tries Redis.
//
// Round trips: a replay is 1 (the open script); a first request about 8
// (the open script, TryLock, the claim's WATCH/GET/MULTI-EXEC, the
// outcome's, unlock).
//
// # Telemetry
//
// Spans and instruments come from WithTracerProvider and WithMeterProvider
// (default: otel's globals), under the instrumentation scope
// "github.com/redfence/redfence/middleware/idempotency".
//
//	span                   kind      attributes
//	redfence.idempotency   INTERNAL  http.request.method, url.path, redfence.idempotency.outcome
//	                                   (handled, replayed, conflict, mismatch, missing_key,
//	                                   bad_request, skipped, redis_down, superseded),
//	                                   redfence.key (the record's lock, "idempotency:" and a hash,
//	                                   as mutex's spans name it), redfence.wait (seconds in the
//	                                   middleware); Redis errors as exception events
//
//	instrument                            kind     unit       attributes
//	redfence.idempotency.handler_calls    counter  {request}  none: requests that called the handler
//	redfence.idempotency.replays          counter  {request}  none: requests given a stored response
//
// # Errors
//
// Every mistake in the configuration is reported by New, wrapping
// ErrInvalid (mutex.ErrInvalid), before any I/O: a nil locker or scope, a
// Locker whose backend lends no Redis client (ErrNeedsRedis: Redlock's,
// etcd's), a bad
// option (see each option for its range). New's middleware panics with an
// error matching ErrInvalid when applied to a nil handler. Serving never
// returns an error.
//
// # Keys in Redis
//
// A record is WithPrefix (default "redfence:idempotency:") + redisfence.Tag
// of its id; its fence is redisfence's, in the same hash slot, over the
// Redis client the Locker's backend lends (redisdriver.ClientOf); its lock
// is the Locker's, named LockPrefix + id under the driver's prefix. Fence keys expire with WithExpiry.
package idempotency
