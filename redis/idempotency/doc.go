// Package idempotency is the Idempotency-Key header for net/http
// (draft-ietf-httpapi-idempotency-key-header, as Stripe's API behaves):
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
// # The key, and who shares a record
//
// Idempotency-Key is 1 to 255 visible ASCII characters (WithMaxKeyLen), in
// one field: bare, as client SDKs send a UUID, or as the RFC 8941 String
// the draft defines ("8e03978e-40d5"), without parameters; both forms name
// the same key. A key's record is kept WithExpiry (24 h) after its first
// request, a stored response as long after it was stored; then the key is
// new again.
//
// A record is keyed by the request's scope (the principal or tenant New's
// scope function names) and its key: a key names one operation of one
// client, so the key reused in that scope with another method, path, query
// or payload is refused (422), never run again. Keys are never shared
// across scopes, so a key guessed or reused by another client runs that
// client's request, with no hint the key exists elsewhere; a scope of "" is
// refused (403). The record holds the first request's fingerprint, a
// SHA-256 of its method, path as sent, query, WithFingerprintHeaders'
// headers (default Content-Type) and, unless WithFingerprintBody(false), its
// body (read up to WithMaxRequestBody before the handler, which gets it
// back whole).
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
//	Redis fails or is silent, at any step below          503 problem (ProblemUnavailable), Retry-After; passed through with WithOnUnavailable(PassThrough)
//	the key's record has another fingerprint             422 problem (ProblemMismatch), whether its request runs or finished
//	a response is stored                                 replayed: status, the handler's headers, body; Idempotent-Replayed: true
//	its response was not stored (too large, streamed)    409 problem (ProblemNotStored), no Retry-After
//	a request with the key runs (holds the lock)         409 problem (ProblemInProgress), Retry-After (WithRetryAfter)
//	otherwise                                            the handler runs
//
// Every refusal is application/problem+json (RFC 9457), its type a Problem
// constant, and leaves nothing in Redis. 422 wins over 409: the fingerprint
// is recorded before any handler runs. docs/idempotency.md explains running
// once, what is stored and replayed, outages, keys and telemetry.
//
// # Guarantees
//
//   - Once: the handler runs under a mutex lock on the record (WithTTL,
//     renewed while it runs), on a context with the request's values but not
//     its cancellation or deadline, which ends only when the lock is lost
//     (context.Cause: mutex.ErrLockLost); a handler bounds its own work.
//   - A client sees only an answer a retry will see too: the outcome is
//     written through a redisfence fence with the lock's token before the
//     response is sent. A request that stalled past its lease loses to the
//     retry that took over: its write is refused and its client gets what the
//     record holds (the retry's response, 409 while that runs, 503 if the
//     record cannot be read).
//   - Stored is every status WithStoreStatus accepts (default all, 5xx
//     included; one it rejects deletes the record): the status, body and the
//     header values the handler added, never outer middleware's values,
//     Set-Cookie, Set-Cookie2 or hop-by-hop headers (unless
//     WithReplayHeaders), nor trailers. A body past WithMaxBody, a Flush or a
//     Hijack is sent as written and not stored: retries get 409
//     (ProblemNotStored) until the key expires, never another run.
//   - A handler that panics stores nothing and releases the lock: a retry
//     runs it again, as after a crash.
//   - Redis: each call is bounded by WithStoreTimeout, and before the
//     handler by the request's deadline too. PassThrough never applies to a
//     request whose context ended or whose client went away. A failed write
//     after the handler leaves the response unstored (a retry runs again once
//     the lease ends), or withheld if the lease ran out.
//
// # Errors
//
// New reports every mistake in the configuration, wrapping ErrInvalid,
// before any I/O; each option states its default and range, and nil
// options are ignored. Serving returns no error:
//
//	situation                                            error
//	nil locker or scope, a bad option                    ErrInvalid (mutex.ErrInvalid; New)
//	a Locker whose backend lends no Redis client         ErrNeedsRedis and ErrInvalid (New)
//	  (Redlock's, or one over etcd)
//	a Locker whose client is a *redis.Ring               ErrInvalid (New): it cannot fence
//	New's middleware applied to a nil handler            panics with an error matching ErrInvalid
//	  (typed nil included)
//	Redis unreachable or failing while serving           no error: the answers above, on the span
package idempotency
