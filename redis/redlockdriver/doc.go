// Package redlockdriver holds a Locker's locks on N ≥ 3 independent Redis
// masters (not replicas of one another, not a Cluster) by Redlock: a lock
// is held when a majority, N/2+1, granted it within its validity. New
// builds a Driver over the masters' clients, and mutex.New a Locker over
// the Driver, which it then owns (the Locker's Close closes the Driver;
// the clients stay the caller's):
//
//	d, err := redlockdriver.New([]redis.UniversalClient{a, b, c})
//	...
//	locker, err := mutex.New(d)
//
// The Driver implements backend.Backend, backend.Watcher (release
// notifications from every node), backend.BulkReleaser and
// backend.Inspector (package mutex/admin).
//
// Redlock has no HandOffer (a Release frees the lock and wakes the next
// local waiter), no Queuer (no fair queue across Lockers: the local FIFO only),
// no ReplicaAcker (the nodes have no replicas by design) and no Batcher:
// mutex.LockAll takes a Redlock Locker's keys one at a time, in key order,
// each a Redlock acquisition of its own. A script per node over several
// keys would need a quorum, an agreed token and a give-back per key
// within one validity, for one round trip saved per key; the ordered path
// keeps every key's rules as they are.
//
// # Acquisition
//
// An attempt runs the acquire script on every node at once, each call
// bounded by the store timeout (WithStoreTimeout; default TTL/20 within
// 5ms..500ms), enforced by the driver whatever the clients'
// ContextTimeoutEnabled says. It stops waiting as soon as the replies
// decide: N/2+1 grants, or too many refusals for a majority to remain
// possible. The lock is held when a majority granted it and the validity,
// TTL − elapsed − drift, is still positive. Otherwise the attempt gives
// back what it took, at once and on a context of its own (nodes that did
// not answer are cleaned up when their call ends), and reports contention
// (Held, its Grant.Detail a *QuorumError with each node's answer)
// or an outage (a *QuorumError matching backend.ErrUnavailable).
//
// A node whose call was still out at the store timeout, or could not reach
// it, rests: attempts with the Locker's own owner ids count it as a
// refusal without asking it, for a while doubling with every failure
// that follows, then one attempt asks it again, and an answer within the
// store timeout ends the rest (the span's redfence.redlock.nodes says
// "resting" for it). Attempts never rest so many nodes that fewer than a
// majority would be asked, and attempts with a shared owner
// (Attempt.Shared) ask every node. A lock taken while nodes rest is held
// on fewer of them, so its renewals have less slack.
//
// # Tokens
//
// Fencing tokens stay monotonic: after winning the quorum, the attempt takes
// the highest token the quorum's nodes issued and writes it to each of them
// (a second round trip), and succeeds only when a majority confirmed. The
// attempt proposes its own clock plus a lead as the token, which a node
// takes when it is at least what the node would issue; when the whole
// quorum took it, the tokens already agree and the second round is
// skipped. Every token ever issued is thus carried by a majority of nodes,
// and any later quorum meets that majority in at least one node, whose
// acquire script issues a larger token (its counter + 1). This assumes that
// a node's counter survives, or, when a node restarts empty, that the time
// floor covers it: its next token is at least its clock in µs, so its clock
// must not be behind the highest token issued. Nodes that grant after the
// quorum was reached get the same token when their reply arrives, if
// theirs differs; a Release before that releases them once they have.
//
// # Held locks
//
// Release acts at once on the nodes the acquisition asked, Extend and TTL
// on all nodes; Extend renews a lease when a majority confirmed it within
// its validity. Redlock's safety rests on bounded clock drift and bounded
// pauses, like every lease: pass the token to the resource (package
// fenced) when correctness matters.
package redlockdriver
