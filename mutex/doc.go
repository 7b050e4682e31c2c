// Package mutex is redfence's lock: a Locker hands out locks on keys of one
// backend, with fencing tokens, renewal, a loss signal, reentrancy and fair
// waiting; semaphores (NewSemaphore) and read-write locks (NewRWMutex) are
// held the same way.
//
// The Locker knows no store, as database/sql knows no database: a driver
// package builds the backend and New builds the Locker over it.
//
//	d, err := redisdriver.New(rdb) // or redlockdriver, etcddriver, pgdriver
//	...
//	locker, err := mutex.New(d)
//	...
//	lk, err := locker.Lock(ctx, "invoice:42")
//	...
//	defer lk.Release(ctx)
//	// work on lk.Context(); hand lk.Token() to the resource
//
// # Guarantees and assumptions
//
//   - Fencing token: Lock.Token is strictly greater than the token of every
//     earlier acquisition of the same key, across processes, expiry and a
//     store restarted without its data (each driver states its clock
//     assumption).
//   - Lease: a lock is held in the store for its TTL from the last acquire
//     or extend. The holder keeps a local deadline (send time of the last
//     successful extend + TTL − drift, WithClockDrift); when it passes, or
//     a renewal finds the lock gone, Lock.Context ends with cause
//     ErrLockLost, before the store could grant the key to anyone else,
//     given clock rates within the drift. A lost lock is never taken again
//     behind the holder's back.
//   - What no lock can do: stop a holder that pauses past its lease and
//     then writes. Pass the token to the resource and let it refuse stale
//     tokens (package fenced).
//   - Waiting: a Locker's calls for a key queue in arrival order and only
//     the head asks the store, woken by the backend's release notices
//     where it has them and by a poll bounded by the holder's lease
//     otherwise. Lock(lk.Context(), key) and a shared WithOwner id
//     re-enter. LockAll takes several keys in one order every Locker
//     shares, so LockAll calls never deadlock.
//
// Every hold (Lock, Locks, Permit, RWHold, election's Term) is a Hold:
// Token, Context and Deadline, and Release. Renewal is on by default, every
// TTL/3, in batches per Locker; Close stops it and releases what is held.
// docs/locking.md explains the algorithm, Redlock, Cluster, semaphores and
// read-write locks; docs/telemetry.md the spans and metrics; package
// mutex/admin is the operator's API.
//
// # Errors
//
// Every error is errors.Is one of these sentinels, or a store or context
// error, wrapped:
//
//	situation                                          error
//	bad argument or option, nil backend or ctx         ErrInvalid (nothing is sent)
//	TryLock: another owner holds the key               ErrNotAcquired (TryLockAll: names the key)
//	TryLock: the store refused, failed or was silent   ErrUnavailable, wrapping the store's error
//	Lock, LockAll, Acquire: ctx ended first            ErrNotAcquired and ctx.Err(), joined; also
//	                                                     ErrUnavailable when the last attempts failed
//	a call on a closed Locker                          ErrClosed
//	Release, Extend or TTL of a hold no longer held    ErrNotHeld (nothing is changed)
//	context.Cause of a hold's context                  ErrLockLost / ErrReleased (Locks: naming the key)
//	WithReplicaAck: too few replicas acknowledged      ErrNotAcquired and a *ReplicaAckError
//	TryAcquire: every permit held; TryRLock: a writer  ErrNotAcquired
//	  holds or waits
//	NewSemaphore, NewRWMutex over a backend without    errors.ErrUnsupported
//	  the capability
//	Lock through a read hold's context                 ErrUpgrade, at once
//	RLock through a hold's context                     ErrInvalid, at once (holds are not reentrant)
//
// ErrNotAcquired without ErrUnavailable means contention; ErrUnavailable
// means an outage, so that an adapter can retry a busy key quietly and
// report a down store. Limits: keys of 1 to MaxKeyLen bytes, 1 to MaxKeys
// per LockAll; leases from MinTTL to MaxTTL; owner ids of 1 to 512 bytes.
package mutex
