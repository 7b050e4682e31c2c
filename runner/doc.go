// Package runner runs each slot of a periodic job on exactly one replica.
//
//	r, err := runner.New(locker)
//	err = r.Add("nightly-report", 24*time.Hour, func(ctx context.Context, run runner.Run) error {
//		return build(ctx, run.Slot, run.Token) // pass run.Token to fenced
//	})
//	err = r.Run(ctx) // blocks until ctx ends, then waits for runs in progress
//
// # Slots from the server's clock
//
// A job's slots are the multiples of its interval since the Unix epoch, on the
// Redis server's clock: a 24 h job runs at 00:00 UTC. WithOffset moves the
// grid (WithOffset(2*time.Hour): at 02:00) and WithLocation reads it on a
// zone's wall clock, daylight saving time included (see WithLocation for the
// days the clock jumps). At each boundary every replica reads the backend's
// clock when it has one (backend.ServerClock: Redis's TIME), works out the
// current slot on it and asks the backend to claim it (backend.SlotClaimer:
// slot N is taken only if no slot N or higher was, atomically for every
// client): a slot is claimed once, cluster-wide, whatever the replicas'
// clocks say. A replica's own clock only decides when it wakes up to ask
// (each claim measures the offset to the server's clock and the next timer
// uses it), so replicas whose clocks disagree by any amount never run a slot
// twice; skew larger than Skip's grace (half the interval) can make a replica
// miss its chance, never double it. This is what gocron's distributed locker
// gets wrong (gocron #841): it locks on the replica's idea of the time.
//
// A claim also closes the job for the interval less the grace, so two runs
// are never closer than that even when a clock runs far ahead. Claims are
// kept ten intervals and a minute after the last one.
//
// # Backends
//
// New takes any Locker whose backend is a backend.SlotClaimer: one Redis
// deployment's (redisdriver) and etcd's (the etcd module's etcddriver).
// Redlock's is none (its masters hold no single copy of the claims), and New
// refuses it with ErrNeedsRedis.
//
// etcd has no clock a client can read, so there the replica's own clock says
// which slot it is and whether it is too late for it (past the grace it skips
// without asking). Uniqueness still comes from consensus, so a slot runs at
// most once whatever the clocks say, and never after a higher one; a replica
// whose clock runs ahead runs the slots it claims early, by its skew, and the
// others are refused every lower one until their clocks catch up. The gap is
// kept by a lease on etcd's leader clock, in whole seconds rounded down; gaps
// under a second, or under the server's least lease TTL, are not kept. A
// claim whose reply was lost (a leader change) is found by the Runner's retry
// within the slot's grace; otherwise an unknown outcome costs the slot, never
// a second run.
//
// # No overlap
//
// The claimer runs the slot holding the job's mutex.Lock, auto-renewed, so a
// run that outlasts its interval is never overlapped by the next one. With
// Skip (the default) a slot whose claimer finds the lock held is dropped;
// with RunOnce it waits for the lock until the slot ends and runs late, and a
// run that overran its slot is followed at once by one run for the slot it
// ran into. The job's ctx is the lock's: it ends with mutex.ErrLockLost when
// the lock is lost (say, the replica was partitioned from Redis past the
// lease), and Run.Token is the lock's fencing token, for fenced.
//
// A replica that dies mid-run keeps the job for the lock's lease
// (WithTTL, default 3 intervals, 1 s to 30 s); then another replica runs
// the next slot it claims.
//
// # Records
//
// The last run of each job (slot, replica, token, outcome, duration) is kept
// in Redis, or in the backend that claims the slots: Last reads it. Panics in jobs are recovered and reported as
// *PanicError to WithErrorHook; the library does not log.
//
// # Telemetry
//
// Spans and instruments come from WithTracerProvider and WithMeterProvider
// (default: otel's globals), under the instrumentation scope
// "github.com/redfence/redfence/runner" with the module's version. The
// Locker's own spans and instruments (claiming the job's lock) are package
// mutex's, configured on the Locker.
//
//	span                   kind      attributes
//	redfence.runner.slot   INTERNAL  redfence.job, redfence.slot (RFC 3339, UTC), redfence.key (the
//	                                   job's lock, "runner:" and the name, as mutex's spans name
//	                                   it), redfence.token (when locked), redfence.outcome (ok,
//	                                   error, panic, lock_lost, overlap); one span per claimed slot,
//	                                   from the claim to the lock's release; status Error but for
//	                                   ok and overlap
//	redfence.runner.run    INTERNAL  redfence.job, redfence.slot, redfence.token, redfence.attempt,
//	                                   redfence.outcome (ok, error); one span per attempt, around
//	                                   the job, a child of the slot's span
//
// mutex's spans of the job's lock (redfence.TryLock or Lock, Unlock) are
// children of the slot's span too, and so is whatever the job traces on
// its ctx, through the attempt's span.
//
//	instrument                           kind       unit    attributes
//	redfence.runner.runs                 counter    {run}   redfence.job, redfence.outcome
//	                                                          (ok, error, panic, lock_lost)
//	redfence.runner.skipped              counter    {slot}  redfence.job, redfence.reason (overlap, late)
//	redfence.runner.overlaps_prevented   counter    {slot}  redfence.job
//	redfence.runner.lock_losses          counter    {run}   redfence.job
//	redfence.runner.lag                  histogram  s       redfence.job; from the slot's start
//	                                                          (on the clock that counts slots)
//	                                                          to the run's start
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
//	empty job name or one over MaxNameLen (256) bytes,     ErrInvalid (from Add; names also from Last)
//	  duplicate name, nil job
//	interval outside [MinInterval, MaxInterval]            ErrInvalid (from Add)
//	  (10 ms to 365 days) or not whole milliseconds
//	bad JobOption: see the limits below                    ErrInvalid (from Add)
//	nil ctx                                                ErrInvalid (from Run, Last)
//	Add or Run once Run has started                        ErrRunning
//	Last for a job with no run on record                   ErrNoRun
//	a run still going past the shutdown timeout            its ctx's cause is ErrShutdown
//	a run whose lock was lost                              its ctx's cause is mutex.ErrLockLost
//	a job that panicked                                    *PanicError, to WithErrorHook
//	Redis or the backend failing while claiming,           to WithErrorHook; the loop goes on. The
//	  locking or recording                                   error wraps the client's, and the cause
//	                                                         of the call's ctx ("no result from Redis
//	                                                         within" the claim's bound, say)
//
// Limits: WithTTL 10 ms to 1 h; WithJitter at least 0 and below the
// interval; WithOffset at least 0, below the interval and whole
// milliseconds; WithLocation non-nil; WithTimeout and WithShutdownTimeout positive; WithRetries at
// least 0; WithReplicaID non-empty; WithClock non-nil. Nil options are
// ignored, and so are nil (or typed-nil) providers, which mean the globals.
package runner
