// Package fenced is the resource-side half of redfence: a Guard that, in the
// same PostgreSQL transaction as a write, rejects the write when it carries a
// fencing token lower than the highest one recorded for its resource.
//
//	g, err := fenced.New(pool)
//	err = g.Migrate(ctx) // at start-up: creates redfence_fences if missing
//	err = g.Do(ctx, "account:42", lk.Token(), func(ctx context.Context, tx pgx.Tx) error {
//		_, err := tx.Exec(ctx, "UPDATE accounts SET balance = $1 WHERE id = 42", balance)
//		return err
//	})
//
// Locks are advisory; tokens are authoritative. A lock holder can pause past
// its lease and keep writing after another process took the lock; the
// resource refuses that write when every write carries its lock's token.
// fenced knows nothing of Redis: a token is an int64 from anything that
// issues increasing tokens (mutex.Lock.Token, an etcd revision, a Raft index).
//
// # Guarantees and assumptions
//
//   - Do records the token as its transaction's first statement. A lower
//     token rolls back before fn runs (a *StaleTokenError carrying the
//     highest); an equal one is accepted: the same holder may write twice.
//   - Writers of one resource are serialised from the fence to the commit:
//     once a transaction has recorded token t, none with a lower token can
//     commit a write behind it, the very first write to a resource included.
//   - DoAll and CheckAll fence one transaction on several resources, one
//     Claim each: the claims are recorded sorted by resource, so two such
//     transactions never deadlock in the fence, and the first stale claim
//     refuses the whole transaction before fn runs, recording nothing.
//   - At every isolation level, for what is read after the fence. Check must
//     come first: it refuses to follow a read (ErrCheckNotFirst).
//   - The guard stops the writers that call it; Protect makes a table refuse
//     the others (SQLSTATE RF002: no token, RF001: stale), with an audited
//     bypass for operators. It guards against accidents and other services,
//     not against a hostile user with SQL access: Protect's doc lists what a
//     trigger cannot stop.
//
// docs/fences.md explains the upsert and its lock, DoAll, the protected
// tables, the isolation levels, the fence and audit tables, and lists the
// spans and metrics; package fenced/sqlfence is this Guard for database/sql
// (MySQL, SQLite), redis/redisfence the fence for data in Redis.
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
// Serialization failures (40001) and deadlocks (40P01) come back unchanged
// in pgx's error: retry the whole unit of work, with the token you hold. An
// error caused by ctx ending (ctx already done, or ending on the way) also
// wraps context.Cause(ctx) when it is not ctx.Err() itself, and says it: on
// a lock's context that is mutex.ErrLockLost, which errors.Is finds beside
// the driver's error.
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
//   - resource: 1 to MaxResourceLen bytes of valid UTF-8 without NUL bytes,
//     which PostgreSQL text cannot hold;
//   - token: 0 to math.MaxInt64 (the fence table checks token >= 0 too).
package fenced
