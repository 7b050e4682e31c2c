// Package redisfence is fenced for data kept in Redis: a Fence applies a
// caller's writes to the keys of one resource (or several, DoAll) only if
// their fencing token is not lower than the highest recorded for the
// resource, and records the token in the same MULTI/EXEC as the writes.
//
// Locks are advisory; tokens are authoritative. A lock holder can pause
// past its lease and write after another process took the lock; when every
// write carries its lock's token (mutex.Lock.Token, or any source of
// increasing tokens) and the store refuses tokens older than one it has
// accepted, the late write is refused. The contract is fenced's: a lower
// token is refused before fn runs (ErrStaleToken, a *StaleTokenError
// carrying the highest token), an equal one is accepted (the same holder
// may write twice), and writes are applied, and tokens recorded, in an
// order where a resource's token never decreases. The package imports
// go-redis, not pgx: a program that uses it compiles no SQL driver.
//
// # How it works
//
// Fence.Do runs an optimistic transaction:
//
//	WATCH <fence key> <keys>       one round trip with the GET on a *redis.Client
//	GET, PTTL <fence key>          the highest token; lower than ours: UNWATCH, ErrStaleToken
//	... fn reads through tx ...
//	MULTI
//	... fn's commands, queued on pipe ...
//	SET <fence key> <token> [PX]   unless the key holds our token already
//	EXEC                           nil when a WATCHed key changed: nothing applied
//
// EXEC applies everything only if no WATCHed key changed since the WATCH.
// The fence key is always WATCHed, so once a write with token t has been
// applied, no write that read the fence before it can be applied behind it:
// its EXEC fails, Do reads the fence again and finds its token stale (or
// not, and tries again). A write with the token the key holds already
// leaves the key alone (short of renewing a WithFenceTTL), so writers
// sharing a token do not make each other retry. The keys given to Do are WATCHed too, so that
// what fn read is still true when its writes are applied: a
// read-modify-write needs its keys listed; a blind write needs none.
//
// A lost race (EXEC returns nil) costs a retry, not an error: Do pauses a
// little (jittered, growing) and starts again from the WATCH, up to
// WithAttempts times in all, then returns ErrContended. fn therefore may
// run more than once, and only its last run's commands are applied. Many
// writers of one resource's keys at once spend their time retrying; the
// lock they hold serialises them, and then the fence has a late holder to
// refuse now and then, and no race to lose.
//
// # Keys and hash slots
//
// The fence of resource r is the key DefaultPrefix + Tag(r) (WithPrefix to
// change the prefix): "redfence:fence:{r}", or "redfence:fence:{{<hex
// SHA-1 of r>}r" when r contains a brace. Put Tag(r) in every data key of
// r ("balance:" + Tag(r), as the key's first braces): on a Cluster a MULTI
// touches one hash slot only, so the fence key and the data keys must share
// one. Do computes the slots itself (CRC16 of the hash tag, as Redis does)
// and refuses a key outside the fence's slot with ErrInvalid before any
// round trip, on every deployment, so that code that works against one
// server works against a Cluster. The keys of the commands fn queues are
// not checked: a Cluster refuses one outside the slot (CROSSSLOT, nothing
// applied), a single server applies it.
//
// # Several resources: DoAll
//
// Fence.DoAll applies one write that spans resources, a transfer between
// two accounts each under its own lock, only if none of the claims (a
// resource and its token, each) is stale: it WATCHes every claimed
// resource's fence key, reads them all, refuses the whole write before fn
// on the first stale claim (sorted by resource, each once, as every
// fenced store orders claims) with that claim's *StaleTokenError, and
// records every token that needs it in the MULTI/EXEC that applies fn's
// commands. Redis takes no locks, so the order of the claims costs no
// deadlock; a lost WATCH race is retried as in Do.
//
// One MULTI runs in one hash slot, and a resource's fence key lives in the
// slot of the resource itself. A standalone server or a Sentinel primary
// (a *redis.Client) has no slots: DoAll takes any resources together. Over
// a client that routes by key (a Cluster) every claimed resource's fence
// key must share one slot, which distinct resources do only by chance;
// DoAll refuses resources in two slots with ErrInvalid, naming them,
// before any round trip. No Redis transaction spans slots: on a Cluster,
// data written together belongs under one resource, or in a SQL store
// fenced by fenced or sqlfence. Each key given to DoAll must share the
// slot of one claimed resource's fence key, on every deployment (put that
// resource's Tag in it).
//
// # What it assumes
//
// One Redis deployment holds both the data and the fence: a standalone
// server, a Sentinel-managed primary (NewFailoverClient), or a Cluster. A
// Ring is not safe for fencing, and New refuses a *redis.Ring: when a
// shard is down it sends the keys to another, which holds neither their
// fence nor their data, so a stale holder's write is accepted there. Not Redlock's N independent masters:
// the fence must live in the same transaction as the data. (A token from a
// Redlock lock is fine; the data just has to live in one deployment.)
//
// Fence keys must not be evicted: an evicted fence accepts the next write
// whatever its token. Run the server with maxmemory-policy noeviction (or
// a volatile-* policy, with no WithFenceTTL on the fence keys).
//
// The fence lives beside the data, and shares its fate. What Redis loses,
// it loses together: a restart without persistence, or a failover to a
// replica that had not received the last writes (replication is
// asynchronous), takes the fence back to an older token along with the data.
// The data and the fence stay consistent with each other, but writes
// acknowledged before the loss are gone, and a holder whose token lay
// between the old fence and the lost one is no longer refused. redisfence
// cannot prevent that; persistence (appendonly with appendfsync always) and
// min-replicas-to-write narrow it, and data that must not lose acknowledged
// writes belongs in a store that does not, behind fenced's guard. mutex's
// tokens keep growing across such losses (they are at least the server's
// clock), so holders after the loss are accepted.
//
// Only writers that go through Do are fenced: a write to the data keys by
// any other path is neither checked nor ordered (though it does send
// concurrent Do calls that WATCH those keys round again).
//
// # The fence key's lifetime
//
// By default a fence key never expires: it has to outlive every holder that
// could still write late with an old token, and nothing bounds that but the
// lock's lease plus the longest pause a holder can sleep through. There is
// one key per resource ever written. WithFenceTTL makes each expire some
// time after its resource's last accepted write; the risk is that a holder
// late by more than that finds no fence and is accepted whatever its token.
// A TTL never shortens a fence's life: a key without expiry, written by a
// Fence without WithFenceTTL, keeps none, and a longer TTL left is kept.
// Delete the fence keys of retired resources yourself, when no holder can
// write to them any more.
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
// beside the client's error.
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
//   - resource: 1 to MaxResourceLen (1024) bytes of valid UTF-8 without NUL
//     bytes, as for every fenced store;
//   - token: 0 to math.MaxInt64.
//
// # Deadlines and telemetry
//
// Do returns within ctx's deadline when the client applies context
// deadlines to its sockets (go-redis's ContextTimeoutEnabled); a client
// without it waits its ReadTimeout for each round trip to a hung server. Do
// makes no spans or metrics of its own: its commands are go-redis's to
// trace (redisotel's hooks see WATCH, GET, MULTI ... EXEC).
package redisfence
