// Package mutex is redfence's lock.
//
// A Locker hands out locks on keys of one Redis deployment (New: standalone,
// Sentinel or Cluster), of N independent masters (NewRedlock), or of any
// backend.Backend (NewWithBackend: the etcd module's etcddriver, for one).
// The Redis code lives in the drivers mutex/backend/redisdriver and
// mutex/backend/redlockdriver, which New and NewRedlock build and close.
// Every acquisition has a random owner id; on Redis, release, extend and
// renewal are Lua scripts that change nothing unless the whole owner id and
// the whole token match.
//
// # What a lock guarantees, and under which assumptions
//
//   - Fencing token: Lock.Token is strictly greater than the token of every
//     earlier acquisition of the same key: across processes, after the key
//     or its counter expired, and after Redis restarted without its data.
//     A token is max(counter+1, Redis server time in µs). The counter (kept in
//     the lock's own key, refreshed on use, expiring after WithFenceTTL of
//     disuse) orders acquisitions inside one microsecond; the time floor makes
//     tokens grow when the counter is gone. Assumption: the Redis server's
//     clock does not step backwards by more than the time between two
//     acquisitions of a key while its counter is gone (counter present, it
//     may step back freely). After a failover the new primary's clock must
//     likewise not be behind the old one's.
//   - Lease: the lock is held in Redis for its TTL from the last acquire or
//     extend. The holder keeps a local deadline = send time of the last
//     successful extend + TTL − drift (1% + 2ms); when it passes, or a
//     renewal finds the lock gone, Lock.Context ends with cause ErrLockLost.
//     Given clocks whose rates differ by less than the drift, that happens
//     before Redis could hand the lock to anyone else. A lost lock is never
//     taken again behind the holder's back.
//   - What no lock can do: stop a holder that pauses (GC, swap, a stalled
//     VM) past its lease and then writes. Pass Lock.Token to the resource and
//     let it reject stale tokens (package fenced). A single Redis with async
//     replication can also lose a lock on failover (WithReplicaAck narrows the
//     window, it does not close it): the token still protects the resource.
//
// # Waiting
//
// Goroutines of one Locker waiting for a key queue in arrival order, and only
// the head asks Redis. An Unlock that finds the head parked hands it the lock
// in its own round trip (a script that releases and takes the lock for the
// next owner), up to 8 times in a row. Lockers whose head found the key held
// queue in Redis beside the key; a release through Redis reserves the lock
// for the first of them for 50 ms and names it in its notification, so only
// that Locker's head wakes. Releases are published on a channel beside the key
// (sharded pub/sub on Cluster); the Locker keeps one subscription and wakes
// only the local head. Subscribing never blocks a Lock on the network: a
// writer goroutine per connection sends the (un)subscriptions, and a Lock
// waits at most 200 ms for the confirmation, so one paused Redlock node
// costs nothing beyond the node timeout. A jittered poll, never longer than
// the holder's remaining lease, covers lost messages and holders that died.
//
// A waiting Lock marks the lock it found held, and only a marked release
// reads the queue and publishes: a release nobody waited for is one SET in
// Redis. A reservation counts as held for everyone but the Locker it is
// for, TryLock included. The first attempt of a Lock that found no local
// waiter goes out like a TryLock (fewer arguments); if the lock is held, it
// queues and marks with the attempt that follows its subscription.
//
// # Reentrancy
//
// Lock(lk.Context(), key) re-enters lk: same *Lock, count+1, no round trip.
// Two acquisitions with the same WithOwner id re-enter in Redis, in one
// process or several. Each Unlock takes one count; the last releases.
//
// # Several keys at once
//
// LockAll(ctx, keys) holds a set of keys as one lock (a transfer's two
// accounts): each key its own lock and fencing token, as Lock would give
// it; one context (Locks.Context) that ends when any key is lost, naming
// it; renewal of every key in the Locker's batches; one Unlock. Keys are
// deduplicated and taken in one order every Locker of the backend shares:
// by group, then key, where the group depends on the key alone (the
// Cluster hash slot; one group on a standalone or Sentinel deployment).
// A call waits for a key only while holding keys before it, so LockAll
// calls never deadlock, whatever order their keys came in. A group's keys
// go in one script, all or none; when it finds one held they are taken
// one at a time, each with Lock's waiting. Redlock and the other backends
// without a backend.Batcher take every key one at a time, in key order
// (one Redlock round per key). A call that fails, is cancelled or meets
// Close releases the keys it took before it returns. TryLockAll takes
// them all or none at once; DoAll is LockAll, fn, Unlock. At most MaxKeys
// keys per call.
//
// # Renewal
//
// On by default: one goroutine per Locker extends all its locks every TTL/3 in
// pipelined batches of up to 1000. Close stops it and releases what is held.
// One timer per Locker, armed for the earliest lease deadline, ends the
// locks whose deadline passed without a renewal (lk.Context() is cancelled
// with ErrLockLost); a lock that falls due after the ones already held
// neither wakes the renewal goroutine nor re-arms that timer, so taking a
// lock costs no context switch.
//
// # Redlock
//
// NewRedlock(clients) returns a Locker with the same API over N ≥ 3
// independent masters. An attempt runs the acquire script on every node at
// once, each call bounded by the node timeout (WithNodeTimeout; default
// TTL/20 within 5ms..500ms), enforced by redfence whatever the clients'
// ContextTimeoutEnabled says. It stops waiting as soon as the replies decide:
// N/2+1 grants, or too many refusals for a majority to remain possible. The
// lock is held when a majority granted it and the validity, TTL − elapsed −
// drift, is still positive. Otherwise the attempt releases what it took, at
// once and on a context of its own (nodes that did not answer are cleaned up
// when their call ends), and Lock retries. A node whose call timed out or
// could not reach it rests: attempts count it as a refusal without asking
// it, for 100 ms doubling to a second, then one attempt asks it again (see
// NewRedlock); the span's redfence.redlock.nodes says "resting" for it.
//
// Fencing tokens stay monotonic: after winning the quorum, the attempt takes
// the highest token the quorum's nodes issued and writes it to each of them
// (a second round trip), and succeeds only when a majority confirmed. The
// attempt proposes its own clock + 100 ms as the token, which a node takes
// when it is at least what the node would issue; when the whole quorum took
// it, the tokens already agree and the second round is skipped. Every
// token ever issued is thus carried by a majority of nodes, and any later
// quorum meets that majority in at least one node, whose acquire script
// issues a larger token (its counter + 1). This assumes that a node's counter
// survives, or, when a node restarts empty, that the time floor covers it:
// its next token is at least its clock in µs, so its clock must not be behind
// the highest token issued (node clocks within the time between
// acquisitions). Nodes that grant after the quorum was reached get the same
// token when their reply arrives, if theirs differs (lowering a value nobody
// was issued is safe); an Unlock before that releases them once they have.
//
// Release acts at once on the nodes the acquisition asked, extend and
// renewal on all nodes; a renewal that cannot
// confirm a majority before the local lease deadline loses the lock. A
// release notification from any node wakes the waiters. WithReplicaAck does
// not apply (the nodes have no replicas by design). Redlock's safety rests on
// bounded clock drift and bounded pauses, like every lease: pass the token to
// the resource (package fenced) when correctness matters.
//
// # Cluster
//
// A lock's key (which also holds its fencing counter) and its release channel
// share one hash slot: the user key sits in a hash tag, or, when it contains
// braces, the SHA-1 of it does.
//
// After a failover whose old master hangs or died, go-redis keeps sending a
// slot's commands to it until a MOVED reply, which such a master never
// sends, or its periodic reload of the slot map, a minute later. So a
// Locker whose call on a Cluster got no answer (a timeout, a refused or
// broken connection) asks the client to reload the map, at most once a
// second: the calls that follow reach the new master about a round trip
// after the reload. The reload asks the nodes in a random order, and waits
// the client's ReadTimeout (5 s by default for a ClusterClient) when it
// asks the hung one first; a shorter ReadTimeout shortens that worst case.
// A holder's renewal waits for the hung master until its lease deadline,
// so its lock is lost (its context ends) before the new master lets
// another Locker have it, with a larger token.
//
// # Semaphores
//
// Locker.Semaphore(name, n) hands out at most n permits of name across
// every Locker of the backend: Acquire waits for one, TryAcquire makes one
// attempt, and each Permit is held as a lock is (its own holder id, a
// lease on the server's clock renewed in the Locker's batches, Context
// ending with ErrLockLost on loss, a fencing token increasing per
// semaphore), until Release, which is idempotent, or Close. The backend
// keeps the set of live holders, not a count, so a double or late release
// never adds a permit, and every script takes out expired holders first,
// so a dead process's permit comes back within one lease. SetLimit changes
// the limit for everyone; lowering it takes no permit back. Waiters queue
// per Locker as Lock's do. A backend without backend.Semaphorer (Redlock)
// refuses Semaphore with errors.ErrUnsupported, before anything is sent.
//
// # Read-write locks
//
// Locker.RWMutex(name) is a read-write lock across every Locker of the
// backend: RLock, TryRLock, Lock and TryLock return an RWHold, held as a
// lock is (its own holder id and lease on the server's clock, renewed by
// its own Locker only, Context ending with ErrLockLost on loss) until
// Unlock or Close. Writers go first: a waiting writer's mark in the backend
// keeps new readers out, so readers that keep coming cannot starve it; the
// mark has the writer's lease, and a writer that gives up takes it out.
// The write's token rises per RWMutex; a read's is the last write's.
// Downgrade makes the write a read in one step; an upgrade (Lock through a
// read hold's context) returns ErrUpgrade at once. A backend without
// backend.RWLocker (Redlock, etcd) refuses RWMutex with
// errors.ErrUnsupported, before anything is sent.
//
// # Inspection and forced release
//
// Inspect reads a key as its servers hold it: free, held or reserved for
// a waiter; the owner id and the OwnerInfo of the Locker that took it
// (WithOwnerInfo: service, host, pid, label; carried inside the owner id,
// so it costs no command); the token; when it was acquired and renewed,
// by the server's clock; the lease left; the Redis count; the Lockers
// queued with how long each has waited; and the forced releases of the
// key. List scans for locks by pattern, every Cluster master and every
// Redlock node, a bounded number of round trips per call; Redlock shows
// the quorum's view and each node's. Held lists what this Locker holds,
// with no round trip (mutex/lockdebug serves it as a page). Nothing in
// the lock's protocol changes for them; an outside backend
// (NewWithBackend) cannot be inspected (errors.ErrUnsupported).
//
// ForceRelease is for the operator whose holder is stuck: instead of
// deleting the key, which lets the old holder go on writing as if it held
// the lock, it leaves a token floor above the holder's token. The holder's
// next renewal fails and its context ends with ErrLockLost; every later
// token exceeds the floor, so a fence that records the floor
// (fenced.Guard.Raise) refuses the old holder's writes at once. Who, when,
// why and the tokens go to an audit stream beside the key (lockKey:audit,
// the latest 1000, kept 30 days after the last). The redfence command
// (cmd/redfence) does all of this from a terminal.
//
// # Telemetry
//
// Spans and instruments come from WithTracerProvider and WithMeterProvider
// (default: otel's globals), under the instrumentation scope
// "github.com/redfence/redfence/mutex" with the module's version. Every span
// is of kind INTERNAL: the Redis commands beneath it are go-redis's to trace
// (redisotel makes CLIENT spans of them). Until the program installs a
// tracer provider, a Locker on the global one makes no spans. Work done
// under a lock (on lk.Context(), lk.Join's or Do's fn ctx) is traced as a
// child of the span of the ctx given to Lock, as the caller's other work
// is: redfence.Lock has ended by the time the lock is held. An adapter's
// span (httplock, asynqlock, runner) is that span, and carries the same
// redfence.key as the Locker's.
//
//	span                     attributes
//	redfence.Lock            redfence.key, redfence.token (when acquired), redfence.attempts,
//	redfence.TryLock           redfence.wait (seconds, float), redfence.reentrant, redfence.outcome
//	                           (acquired, reentered, contended, timeout, cancelled, closed, error,
//	                           replica_ack); an exception event per failed attempt, with
//	                           error.type; Redlock: events redlock.acquire (redfence.redlock.votes,
//	                           .quorum, .nodes, .validity in seconds) and redlock.token
//	                           (redfence.redlock.agreed, .confirmed, redfence.token)
//	redfence.LockAll         redfence.keys (how many), redfence.wait, redfence.outcome (as Lock's);
//	redfence.TryLockAll        an event redfence.group per group attempt (redfence.keys,
//	                           redfence.outcome: acquired, held, error); keys taken one at a
//	                           time are child redfence.Lock / redfence.TryLock spans
//	redfence.ExtendAll       redfence.keys, redfence.outcome (extended, not_held, error)
//	redfence.UnlockAll       redfence.keys, redfence.outcome (released, not_held, error); a
//	                           redfence.Unlock child span per key
//	redfence.Extend          redfence.key, redfence.token, redfence.outcome (extended, not_held, error)
//	redfence.Unlock          redfence.key, redfence.token, redfence.outcome (released, handed_off,
//	                           not_held, error)
//	redfence.LockLost        redfence.key, redfence.token, redfence.reason; status Error
//	redfence.ForceRelease    redfence.key, redfence.token (the holder's), redfence.reason
//	redfence.Semaphore.Acquire   redfence.key (the name), redfence.token, redfence.outcome
//	redfence.Semaphore.TryAcquire  (acquired, contended, timeout, closed, error)
//	redfence.Permit.Release  redfence.key, redfence.token, redfence.outcome (released, not_held, error)
//
//	instrument                       kind           unit           attributes
//	redfence.lock.acquire.duration   histogram      s              redfence.outcome
//	redfence.lock.acquisitions       counter        {acquisition}  redfence.outcome
//	redfence.lock.contention         counter        {attempt}      -
//	redfence.lock.attempt.errors     counter        {attempt}      error.type
//	redfence.lock.losses             counter        {lock}         redfence.reason
//	redfence.lock.hold.duration      histogram      s              -
//	redfence.lock.held               updowncounter  {lock}         -
//	redfence.lock.forced_releases    counter        {release}      redfence.reason
//
// A permit counts in redfence.lock.held, its hold and its loss as a lock
// does, and a permit attempt finding every permit held in
// redfence.lock.contention.
//
// A LockAll or TryLockAll counts in the acquisition metrics once, as a
// Lock does, whatever its number of keys; each key held counts in
// redfence.lock.held, its hold and its loss.
//
// redfence.reason says how a lock was lost ("lease deadline passed",
// "renewal found the lock gone", ...: a short fixed set), or, on forced
// releases, the reason the operator gave, cut to 64 bytes: give a short
// category ("stuck job"), and the details in the audit stream. error.type is a
// Redis error's prefix (NOPERM, LOADING, ...), "timeout", a
// network operation ("dial", "read", ...), "quorum", or "_OTHER". Spans and
// errors carry the key; metrics never do, so their cardinality stays bounded.
//
// # Errors
//
// Every error is errors.Is one of these sentinels, or a server or context
// error, wrapped:
//
//	situation                                            error
//	bad argument or option, nil or typed-nil client,     ErrInvalid (nothing is sent to Redis)
//	  nil ctx, Redlock of < 3 or repeated nodes
//	TryLock: another owner holds the key                 ErrNotAcquired (Redlock: a *QuorumError)
//	  (TryLockAll: one of the keys; nothing is taken)      the error names the key
//	TryLock: Redis refused, failed or did not answer     ErrUnavailable, wrapping the server's error
//	  (Redlock: too few nodes answered)                    (Redlock: a *QuorumError, node by node)
//	Lock, LockAll: ctx ended first                       ErrNotAcquired and ctx.Err(), joined; also
//	                                                       ErrUnavailable and the server's error when
//	                                                       the last attempts failed or went unanswered
//	a call on a closed Locker                            ErrClosed
//	Unlock, Extend or TTL of a lock no longer held       ErrNotHeld (nothing is changed)
//	Unlock, Extend or TTL failing on the server          the server's error (Redlock Extend:
//	                                                       ErrUnavailable, node by node)
//	context.Cause(lk.Context()) after a loss / release   ErrLockLost / ErrReleased (Locks: naming the key)
//	Locks.Unlock when a key was lost                     ErrNotHeld (the other keys are released)
//	WithReplicaAck: too few replicas acknowledged        ErrNotAcquired and a *ReplicaAckError
//	ForceRelease of a key not held (or held under        ErrNotHeld (nothing is changed)
//	  another token than the one given)
//	Inspect, List, ForceRelease on an outside backend    errors.ErrUnsupported
//	Inspect, List, ForceRelease: no answer (Redlock:     ErrUnavailable, node by node; never an
//	  fewer than a quorum of nodes answered)               empty listing or a free key
//	ListAll: a quorum answered, not every node           ErrPartial, with the locks found
//	  (List: Page.Skipped)
//	Semaphore over a backend without semaphores          errors.ErrUnsupported
//	  (Redlock, NewWithBackend without backend.Semaphorer)
//	TryAcquire: every permit held                        ErrNotAcquired
//	Acquire: ctx ended first                             ErrNotAcquired and ctx.Err(), as Lock's
//	Permit.Release of a permit released or lost          ErrNotHeld (nothing is changed; no permit added)
//	RWMutex over a backend without read-write locks      errors.ErrUnsupported
//	  (Redlock, etcd, NewWithBackend without backend.RWLocker)
//	Lock or TryLock through a read hold's context        ErrUpgrade, at once (nothing is sent)
//	RLock through a hold's context, Lock through the     ErrInvalid, at once (holds are not reentrant)
//	  write's
//	TryRLock: a writer holds or waits; TryLock: held     ErrNotAcquired
//	context.Cause(p.Context()) after a loss / release    ErrLockLost / ErrReleased
//
// ErrNotAcquired without ErrUnavailable means contention: other holders stood
// in the way. ErrUnavailable means an outage, so that an adapter can retry a
// busy key quietly and report a down server.
//
// Limits: keys of 1 to MaxKeyLen bytes, 1 to MaxKeys of them per LockAll; leases (WithTTL, Extend) from MinTTL
// to MaxTTL; owner ids of 1 to 512 bytes; WithFenceTTL at least 1s. A grant
// that arrives after its lease ran out is given back, never returned.
package mutex
