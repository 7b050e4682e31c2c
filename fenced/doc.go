// Package fenced is the resource-side half of redfence: a Guard that, in the
// same PostgreSQL transaction as a write, rejects the write when it carries a
// fencing token lower than the highest one recorded for its resource.
//
// Locks are advisory; tokens are authoritative. A lock holder can pause past
// its lease (GC, swap, a stalled network) and keep writing after another
// process took the lock. The lock cannot stop that write; the resource can,
// when every write carries the token the writer's lock came with and the
// resource refuses tokens older than one it has already accepted. fenced knows
// nothing of Redis: a token is an int64 from anywhere that issues increasing
// tokens (mutex.Lock.Token, an etcd revision, a Raft index).
//
// # How it works
//
// Guard.Do opens a transaction and, as its first statement, upserts the
// resource's row in the fence table:
//
//	INSERT INTO redfence_fences AS f (resource, token) VALUES ($1, $2)
//	ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = now()
//	WHERE f.token <= EXCLUDED.token
//	RETURNING token, set_config('redfence.fence_' || f.tableoid, <declared + this>, true)
//
// The upsert locks the row whether or not its condition holds, and the lock
// is kept until the transaction ends, so writers of one resource are
// serialised from the fence to the commit: once a transaction has recorded
// token t, no transaction with a token below t can commit a write behind it.
// The very first write to a resource is covered too: concurrent inserts of a
// missing row conflict on the primary key and the loser re-checks the
// winner's row (a SELECT ... FOR UPDATE would lock nothing there).
//
// A lower token rolls the transaction back before fn runs and returns an
// error matching ErrStaleToken (a *StaleTokenError carrying the highest
// token). An equal token is accepted: the same holder may write twice.
//
// # Several resources: DoAll
//
// A write that spans resources, a transfer between two accounts each under
// its own lock, is fenced on all of them in one transaction by
// Guard.DoAll (or CheckAll, in a transaction of your own): one Claim per
// resource, with that resource's token. The guard records the claims
// sorted by resource, as bytes, each resource once, whatever order the
// caller lists them in, so any two such transactions lock the fence rows
// they share in the same order and wait for each other instead of
// deadlocking there; writes that fn makes to rows of its claimed
// resources alone are then serialised behind those locks too. The first
// stale claim in that order refuses the whole transaction before fn runs,
// with the *StaleTokenError a Do with that claim alone would return
// (naming its resource), and records nothing. Each recorded claim is
// declared as Do's, so a protected table accepts the rows of every
// claimed resource in that transaction and refuses those of any other.
// The fence costs one statement per resource; nothing changed in the
// fence table, the declaration or the triggers.
//
// # Every writer: Protect
//
// The guard stops the writers that call it. Guard.Protect makes a table
// stop the others too (a migration, an admin in psql, a second service, a
// batch job written before the lock): after each INSERT, UPDATE, DELETE,
// MERGE, INSERT … ON CONFLICT or COPY, a statement trigger checks the rows
// it changed (its transition tables: the rows as stored) against the
// tokens its transaction declared to this Guard's fence table, which only
// Do and Check declare (the set_config above, in the upsert's RETURNING,
// so only for a token recorded; the setting is named after the fence
// table's OID, so each fence table has its own). It reads the declarations
// once per statement, whatever its rows. Partitions are covered; a table
// with inheritance children is refused. A row's resource is a SQL
// expression over its columns given to Protect ('account:' || id),
// evaluated on pg_catalog's search path. A statement with a row whose
// resource has no token in the transaction is refused with SQLSTATE RF002
// (ErrNoToken), one with a token below the highest recorded with RF001
// (ErrStaleToken); an UPDATE that moves a row to another resource needs
// both tokens; TRUNCATE is refused. Do maps a refusal met in fn (Refusal);
// a writer of its own can call Refusal too. Operators write without a
// token on purpose and on the record: SET LOCAL redfence.bypass = 'reason'
// (optionally limited to the members of a role, judged by the session's
// login role, WithBypassRole) lets the statements through, and each adds a
// row to the audit table beside the fence table (redfence_fences_bypass)
// and a NOTICE. Protect guards against accidents and other services, not
// against a hostile user with SQL access: its doc lists what a trigger
// cannot stop (the owner or a superuser disabling it,
// session_replication_role = replica, a writer that declares a token
// itself, a later inheritance child, a column rewrite). It takes one lock
// on the table, up front, waiting for it no longer than a lock timeout
// (WithLockTimeout): SHARE ROW EXCLUSIVE, or ACCESS EXCLUSIVE when it
// drops an earlier version's triggers. Unprotect removes it, under ACCESS
// EXCLUSIVE. What the triggers cost a write is in
// bench/README.md.
//
// # Isolation levels
//
// The guarantee holds at every isolation level PostgreSQL offers. Under READ
// COMMITTED (the default) a writer blocked on the fence row re-checks the
// condition against the committed row when the lock is released. Under
// REPEATABLE READ and SERIALIZABLE the same race ends with a serialization
// failure (SQLSTATE 40001) instead, which Do returns unchanged, like
// deadlocks (40P01): retry the whole unit of work, with the token you hold.
//
// That holds for what is read after the fence. A transaction of your own
// that reads a row, then calls Check, waits there while the previous
// holder commits, then writes back what it read, would undo that write
// (a lost update) under READ COMMITTED. Check refuses to follow a read:
// ErrCheckNotFirst, nothing recorded. Call Check first, then read.
//
// # Errors
//
// New, Do, DoAll, Check, CheckAll, Raise, Fences, Migrate, Protect and
// Unprotect report each situation with the error on its right (DoAll and
// CheckAll as Do and Check); errors.Is finds the sentinels through any
// wrapping:
//
//	Situation                                        Error
//	bad database or option (see below)               ErrInvalid, from New
//	bad argument or Guard (see below)                ErrInvalid, before any round trip
//	ctx already done                                 ctx.Err(), wrapped, before any round trip
//	token lower than the highest recorded            ErrStaleToken, a *StaleTokenError (not from Raise);
//	                                                   DoAll, CheckAll: the first stale claim's
//	Check after a read in its transaction (Do over   ErrCheckNotFirst; nothing recorded: roll back,
//	  a pgx.Tx: a read in the enclosing one)           begin again with Check first
//	fence table missing                              ErrNotMigrated: call Guard.Migrate
//	PostgreSQL or connection failure, ctx ending     pgx's error wrapped with %w (*pgconn.PgError, ctx.Err(), ...)
//	fn returned an error                             that error, as it is, unless a protected table
//	                                                   refused a row: ErrNoToken, or ErrStaleToken with a
//	                                                   *StaleTokenError, wrapping fn's error
//	a raw write refused by a protected table         *pgconn.PgError, SQLSTATE RF002 or RF001 (Refusal
//	                                                   maps it to ErrNoToken or ErrStaleToken)
//	a table, expression, role or audit table         ErrInvalid, before anything changes (see Protect)
//	  Protect refuses
//	Protect, Unprotect: no lock within its timeout   *pgconn.PgError, SQLSTATE 55P03 (lock_not_available),
//	                                                   wrapped; nothing changed
//
// An error caused by ctx ending (ctx already done, or ending on the way)
// also wraps context.Cause(ctx) when it is not ctx.Err() itself, and says
// it: on a lock's context that is mutex.ErrLockLost, which errors.Is finds
// beside the driver's error.
//
// ErrInvalid is mutex.ErrInvalid, the one bad-input sentinel of redfence.
// New refuses a nil or typed-nil database and a bad WithTable name. Bad
// arguments of the calls are: a nil or zero Guard, a nil ctx, fn or tx, a
// Fences limit outside 1 to MaxFences, a WithLockTimeout of zero or less,
// an empty resource expression, no claims or one resource claimed with two
// different tokens (DoAll, CheckAll; the error names the claim), and a
// resource (or a Fences prefix, which may be empty) or token outside these
// limits:
//
//   - resource: 1 to MaxResourceLen (1024) bytes of valid UTF-8 without NUL
//     bytes, which PostgreSQL text cannot hold;
//   - token: 0 to math.MaxInt64 (the fence table checks token >= 0 too).
//
// # Telemetry
//
// Spans and instruments come from WithTracerProvider and WithMeterProvider
// (default: otel's globals), under the instrumentation scope
// "github.com/redfence/redfence/fenced" with the module's version. The
// spans are of kind INTERNAL: Do's wraps the caller's fn, and the statements
// sent to PostgreSQL are pgx's to trace (a pgx tracer makes CLIENT spans of
// them).
//
//	span                      attributes
//	redfence.fenced.Do        redfence.resource, redfence.token, redfence.outcome (accepted, stale,
//	redfence.fenced.Check       error), redfence.highest (the highest token recorded, once checked);
//	redfence.fenced.Raise       status Error on errors other than a stale token
//	redfence.fenced.DoAll     redfence.resources, redfence.tokens (the claims in the order recorded),
//	redfence.fenced.CheckAll    redfence.outcome; when stale, redfence.resource and redfence.highest
//	                            of the stale claim; status as above
//
//	instrument             kind     unit     attributes
//	redfence.fence.checks  counter  {check}  redfence.outcome (accepted, stale); Do, Check and
//	                                           each claim DoAll and CheckAll record
//
// # Tables
//
// Migrate creates the fence table (default redfence_fences, WithTable to
// change it) if it is missing. The table holds one row per resource ever
// written or raised; Fences lists them. Delete rows of retired resources
// yourself if that matters. Protect adds, beside the fence table, the
// bypass audit table (its name with "_bypass"), and beside each protected
// table one trigger function per fence table, named, as its triggers are,
// after a hash of the fence table's schema and name.
package fenced
