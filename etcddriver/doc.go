// Package etcddriver holds redfence locks in etcd: give its Driver to
// mutex.New and the Locker (renewal with a loss signal, reentrancy, waiting
// in arrival order, fencing tokens, the adapters that need no Redis
// client, and package admin's Inspect/List/ForceRelease) runs on consensus
// instead of Redis.
//
//	cli, _ := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:2379"}})
//	d, err := etcddriver.New(cli)
//	if err != nil { ... }
//	locker, err := mutex.New(d) // locker.Close closes d; cli stays the caller's
//
// It uses etcd's KV, lease and watch APIs directly (not
// clientv3/concurrency):
//
//   - A lock key is the Driver's prefix (WithPrefix, default "redfence:")
//     and the Locker's key; what the Driver keeps beside it (forced
//     releases, an election's terms) is that key, a NUL byte and a name.

//   - One lease per held lock, which lasts the Locker's TTL from no earlier
//     than the call: its TTL is the Locker's rounded up to whole seconds,
//     with a reuse window (a tenth of the TTL, at least a second), never
//     below the server's minimum. A released lock's lease, which holds
//     nothing then, is kept for the next lock while it still lasts that long
//     from the next attempt, so an uncontended Lock+Release sends two
//     transactions (no grant, no revoke); a holder that dies keeps its key up
//     to the window longer. Close revokes the leases kept.
//   - Acquire is one transaction: a free key is put with the lease (the
//     owner in its value); a key the owner holds is re-entered; otherwise
//     the holder's remaining lease is reported for the Locker's poll.
//   - The fencing token is the key's create revision, plus WithTokenBase:
//     revisions only grow, across leader changes and restarts.
//   - Release, Extend and TTL compare the owner and the create revision in
//     the transaction, never the key alone, so a retried release never
//     frees a newer holder's key (etcd issue 22082).
//   - Waiters are woken by a watch of the key's deletes, resumed from the
//     last revision it reported; after a compaction it reads the key afresh
//     instead of losing the waiter (etcd issue 9715).
//   - A forced release records who, when and why beside the key, where
//     Inspect shows it; later tokens exceed the floor with no counter kept.
//
// # Terms for package election
//
// The Driver is a backend.TermJournal: an election's terms (create
// revisions of its lock key, as any token) are recorded beside the lock
// key, each by a transaction that compares the newest term, so a term
// not above it is refused; observers read by term and watch from the
// revision they read, and miss no term while connected.
//
// # Slot claims for package runner
//
// The Driver is a backend.SlotClaimer, so that package runner runs jobs
// over an etcd Locker with its claims and records in etcd. etcd has no clock
// a client can read (a response carries a revision and a raft term, no
// time), so the slot numbers come from each replica's clock, aligned with
// the job's grid; what etcd adds is consensus. A claim is one transaction:
// it writes slot N unless the stored slot is N or higher, so a slot is
// claimed at most once cluster-wide, and never after a higher one, however
// far apart the replicas' clocks are. The leader's clock counts only
// leases: a claim with a gap of a second or more also puts a key on a lease
// of that many whole seconds (rounded down, granted just before the claim;
// left out when under the server's least lease TTL, which would lengthen
// it), and the next claim needs that key gone. A new leader only lengthens
// leases, so the gap never shortens. A claim whose reply was lost is found
// by the same claimer's retry. Claims and records sit on leases of their
// own that outlive Close (a removed job's keys run out), beside the key the
// runner names (under the runner's prefix, not the Driver's), out of List. package runner says what this gives and what
// it does not.
//
// What it assumes: a majority of the members up (without one no lock is
// granted, renewed or released, and holders lose their locks when their
// leases run out on the Locker's side); and, as with every lease, a holder
// paused past its lease is stopped by the fence in the resource (package
// fenced), not by etcd.
//
// # Server versions
//
// Tested against etcd v3.7.3 (embedded). Run servers of v3.5.13, v3.4.30 or
// later (any v3.6 or v3.7): before those a leader stalled on a slow disk
// could revoke every lease after it had lost the leadership (etcd issue
// 15247, fixed by PR 16822), so holders lost their locks early. On every
// version a new leader restarts each lease's countdown from its
// full TTL (etcd issue 9395): a holder that stops renewing keeps its key
// longer than its TTL, never shorter, so the Locker's local deadline stays
// inside the lease.
//
// # Errors
//
//	situation                                   error
//	nil client, a NUL in WithPrefix, negative   ErrInvalid, from New
//	  WithTokenBase
//	empty key or owner, a NUL in either,        ErrInvalid; nothing sent
//	  TTL not positive, token not above the
//	  base, List count not positive; a slot
//	  claim's empty claimer or negative gap
//	a List cursor not one List handed out       backend.ErrBadCursor
//	the Driver was closed                       ErrClosed; nothing sent
//	etcd did not answer (the outcome unknown)   the client's error, wrapped
//
// ErrInvalid is backend.ErrInvalid, which is mutex.ErrInvalid: through a
// mutex.Locker a refusal here (a key with a NUL byte, which the Locker
// passes on) matches mutex.ErrInvalid as the Locker's own refusals do;
// etcd's errors match mutex.ErrUnavailable.
package etcddriver
