// Package redisfence is fenced for data kept in Redis: a Fence applies a
// caller's writes to the keys of one resource (or several, DoAll) only if
// their fencing token is not lower than the highest recorded for the
// resource, and records the token in the same MULTI/EXEC as the writes.
//
// Locks are advisory; tokens are authoritative: when every write carries its
// lock's token (mutex.Lock.Token, or any source of increasing tokens), a
// holder that paused past its lease is refused. The package imports
// go-redis, not pgx: a program that uses it compiles no SQL driver.
//
// # Guarantees and assumptions
//
//   - fenced's contract: a lower token is refused before fn runs
//     (ErrStaleToken, a *StaleTokenError carrying the highest token), an
//     equal one is accepted (the same holder may write twice), and writes
//     are applied, and tokens recorded, in an order where a resource's
//     token never decreases.
//   - Do is an optimistic transaction: it WATCHes the fence key and the keys
//     it is given (those fn reads), and EXEC applies nothing when one
//     changed. A lost race is retried, up to WithAttempts times in all, so
//     fn may run more than once; only its last run's commands are applied.
//   - Hash slots: every key given to Do, and every key fn writes, must share
//     the fence key's slot: put Tag(resource) in it. Do refuses a key given
//     to it outside the slot, on every deployment, before any round trip.
//     Over a Cluster, DoAll's claimed resources must share one slot too.
//   - One Redis deployment holds both the data and the fence: a standalone
//     server, a Sentinel-managed primary or a Cluster. Not a Ring (New
//     refuses a *redis.Ring), not Redlock's independent masters.
//   - Fence keys must not be evicted (maxmemory-policy noeviction, or a
//     volatile-* policy without WithFenceTTL); by default they never expire.
//   - The fence shares its data's fate: what Redis loses (a restart without
//     persistence, a failover to a replica behind), it loses together, and
//     a holder whose token lay between the old fence and the lost one is no
//     longer refused.
//   - Only writers that go through Do are fenced.
//
// docs/fences.md explains the transaction, the keys and slots, DoAll, what
// a lost write means for the fence and when to set WithFenceTTL.
//
// # Errors
//
// New, Do and DoAll report each situation with the error on its right;
// errors.Is finds the sentinels through any wrapping:
//
//	Situation                                        Error
//	bad client or option (see below)                 ErrInvalid, from New
//	bad argument or Fence (see below)                ErrInvalid, before any round trip
//	ctx already done                                 ctx.Err(), wrapped, before any round trip
//	token lower than the highest recorded            ErrStaleToken, a *StaleTokenError (DoAll: the
//	                                                   first stale claim's; nothing applied)
//	every attempt lost a WATCH race                  ErrContended, wrapping redis.TxFailedErr
//	ctx ended while Do waited to try again           ErrContended, wrapping ctx.Err()
//	fn returned an error                             that error, as it is
//	fn executed pipe (Exec, Pipelined, TxPipelined)  ErrInvalid; nothing applied
//	a command fn queued failed inside EXEC           its redis.Error, wrapped: the others were applied
//	                                                   and the token recorded (no roll-back in Redis)
//	a command fn queued was refused (EXECABORT,      the redis.Error, wrapped; nothing applied
//	  CROSSSLOT, a syntax error)
//	the fence key holds no token                     an error that says so, naming the key
//	Redis or connection failure, ctx ending          go-redis's error, wrapped with %w
//
// An error caused by ctx ending (ctx already done, or ending on the way)
// also wraps context.Cause(ctx) when it is not ctx.Err() itself, and says
// it: on a lock's context that is mutex.ErrLockLost, which errors.Is finds
// beside the client's error. Do returns within ctx's deadline when the
// client applies context deadlines to its sockets (go-redis's
// ContextTimeoutEnabled); otherwise a hung server holds each round trip for
// the client's ReadTimeout.
//
// ErrInvalid is mutex.ErrInvalid, the one bad-input sentinel of redfence.
// New refuses a nil or typed-nil client, a *redis.Ring and a bad option
// (WithPrefix, WithFenceTTL, WithAttempts say which). Bad arguments of the
// calls are: a nil or zero Fence, a nil ctx or fn, a key outside the fence
// key's hash slot (DoAll: outside every claimed fence's slot), no claims or
// one resource claimed with two different tokens (DoAll; the error names
// the claim), claimed resources whose fences are in two slots over a
// client that routes by key, and a resource or token outside these limits:
//
//   - resource: 1 to MaxResourceLen bytes of valid UTF-8 without NUL
//     bytes, as for every fenced store;
//   - token: 0 to math.MaxInt64.
//
// Do makes no spans or metrics of its own: its commands are go-redis's to
// trace (redisotel's hooks see WATCH, GET, MULTI ... EXEC).
package redisfence
