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
// clientv3/concurrency): one key per lock (WithPrefix, default "redfence:",
// and the Locker's key) on a lease of its own, and every change one
// transaction.
//
// # Guarantees and assumptions
//
//   - The fencing token is the key's create revision, plus WithTokenBase:
//     revisions only grow, across leader changes and restarts.
//   - A lock's lease lasts the Locker's TTL from no earlier than the call,
//     in whole seconds rounded up and never below the server's minimum; a
//     holder that dies keeps its key a little longer than its TTL, never
//     shorter, so the Locker's local deadline stays inside the lease.
//   - Release, Extend and TTL compare the owner and the create revision in
//     the transaction, never the key alone, so a retried release never
//     frees a newer holder's key.
//   - Waiters are woken by a watch of the key's deletes, and a compaction
//     does not lose them.
//   - A forced release records who, when and why beside the key, where
//     Inspect shows it; later tokens exceed the floor with no counter kept.
//   - The Driver is a backend.TermJournal for package election: a term not
//     above the newest is refused, and observers miss no term while
//     connected.
//   - The Driver is a backend.SlotClaimer for package runner: a slot is
//     claimed at most once cluster-wide, and never after a higher one,
//     however far apart the replicas' clocks are. etcd has no clock a
//     client can read, so the slot numbers come from each replica's clock;
//     the gap between claims is kept on a lease, in whole seconds. Claims
//     and records outlive Close and run out on their leases.
//   - It assumes a majority of the members up: without one no lock is
//     granted, renewed or released, and holders lose their locks when
//     their leases run out on the Locker's side. As with every lease, a
//     holder paused past its lease is stopped by the fence in the resource
//     (package fenced), not by etcd.
//   - It assumes servers with the fix that stops a deposed leader from
//     revoking every lease early; docs/etcd.md names the releases.
//
// docs/etcd.md explains the keys, leases and transactions, the terms and
// slot claims, and the server releases to run; package runner's guide,
// docs/runner.md, says what the slot claims give a job.
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
