// Package runner runs each slot of a periodic job on exactly one replica.
//
//	r, err := runner.New(locker)
//	err = r.Add("nightly-report", 24*time.Hour, func(ctx context.Context, run runner.Run) error {
//		return build(ctx, run.Slot, run.Token) // pass run.Token to fenced
//	})
//	err = r.Run(ctx) // blocks until ctx ends, then waits for runs in progress
//
// A job's slots are the multiples of its interval since the Unix epoch, moved
// by WithOffset and read on WithLocation's wall clock (default UTC): a 24 h
// job runs at 00:00 UTC. At each boundary every replica works out the
// current slot and asks the Locker's backend, a backend.SlotClaimer, to
// claim it; the claimer runs it under the job's lock.
//
// # Guarantees and assumptions
//
//   - Once per slot: a slot is claimed at most once, cluster-wide, and never
//     after a higher one, atomically in the backend. Over a backend with a
//     clock (backend.ServerClock: Redis's TIME, PostgreSQL's
//     clock_timestamp()) the slot is counted on the server's clock, and a
//     replica's own clock only decides when it wakes up to ask, so clocks
//     that disagree by any amount never run a slot twice;
//     skew past the slot's grace can make a replica miss a slot, never
//     double it. Two runs are never closer than the interval less the grace.
//   - etcd has no clock a client can read: over etcddriver the replica's clock
//     counts the slots. A slot still runs at most once, and never after a
//     higher one; a replica whose clock runs ahead runs the slots it claims
//     early, by its skew.
//   - No overlap: the claimer runs the slot holding the job's mutex.Lock,
//     renewed, so a run that outlasts its interval is never overlapped by the
//     next. With Skip (the default) a slot whose lock is held is dropped; with
//     RunOnce it runs late, once (WithMissed).
//   - The job's ctx is the lock's: it ends with cause mutex.ErrLockLost when
//     the lock is lost, and Run.Token is the lock's fencing token, for the
//     resource to check (package fenced). A replica that dies mid-run keeps
//     the job for the lock's lease (WithTTL); then another runs the next slot
//     it claims.
//   - Backends: one Redis deployment's (redisdriver), PostgreSQL's (pgdriver)
//     and etcd's claim slots;
//     Redlock's holds no single copy of the claims, and New refuses it.
//   - The last run of each job is kept in the backend: Last reads it. Panics
//     in jobs are recovered and reported as *PanicError to WithErrorHook; the
//     library does not log.
//
// docs/runner.md explains the slot grid and its clock, each backend's claim,
// the missed-slot policies and the records, and lists the spans and metrics.
//
// # Errors
//
// Bad input is reported by New, Add, Run and Last before anything reaches
// the backend:
//
//	situation                                              error
//	nil locker, a bad Option                               ErrInvalid (from New)
//	a Locker whose backend claims no slots: Redlock's      ErrNeedsRedis and ErrInvalid (from New)
//	a nil or zero Runner                                   ErrInvalid (from Add, Run, Last)
//	empty job name or one over MaxNameLen bytes,           ErrInvalid (from Add; names also from Last)
//	  duplicate name, nil job
//	interval outside [MinInterval, MaxInterval]            ErrInvalid (from Add)
//	  or not whole milliseconds
//	bad JobOption: see the limits below                    ErrInvalid (from Add)
//	nil ctx                                                ErrInvalid (from Run, Last)
//	Add or Run once Run has started                        ErrRunning
//	Last for a job with no run on record                   ErrNoRun
//	a run still going past the shutdown timeout            its ctx's cause is ErrShutdown
//	a run whose lock was lost                              its ctx's cause is mutex.ErrLockLost
//	a job that panicked                                    *PanicError, to WithErrorHook
//	the backend failing while claiming, locking or         to WithErrorHook; the loop goes on. The
//	  recording                                              error wraps the client's, and the cause
//	                                                         of the call's ctx (no result from the
//	                                                         backend within the claim's bound, say)
//
// Limits: WithTTL 10 ms to 1 h; WithJitter at least 0 and below the
// interval; WithOffset at least 0, below the interval and whole
// milliseconds; WithLocation non-nil; WithTimeout and WithShutdownTimeout
// positive; WithRetries at least 0; WithReplicaID non-empty; WithClock
// non-nil. Nil options are ignored, and so are nil (or typed-nil)
// providers, which mean the globals.
package runner
