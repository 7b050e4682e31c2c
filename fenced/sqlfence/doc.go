// Package sqlfence is fenced's Guard for database/sql: in the same
// transaction as a write, it rejects the write when it carries a fencing
// token lower than the highest one recorded for its resource, on
// PostgreSQL, MySQL (and MariaDB) or SQLite.
//
//	g, err := sqlfence.New(db, sqlfence.MySQL) // db from sql.Open, with the driver of your choice
//	err = g.Migrate(ctx)                       // at start-up: creates redfence_fences if missing
//	err = g.Do(ctx, "account:42", lk.Token(), func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = ? WHERE id = 42", balance)
//		return err
//	})
//
// The package imports no driver: the caller opens the *sql.DB and says which
// Dialect it speaks, so importing sqlfence compiles neither pgx nor a MySQL
// or SQLite driver.
//
// # Guarantees and assumptions
//
//   - fenced.Guard's contract: Do runs fn in a transaction that first records
//     the token, and commits fn's writes only then; a lower token rolls back
//     before fn runs; an equal token is accepted (the same holder may write
//     twice); writers of one resource are serialised from the fence to the
//     commit (SQLite: every writer of the database). DoAll and CheckAll fence
//     several resources in one order, without deadlocking in the fence.
//   - The errors are fenced's own values (package fence), so
//     errors.Is(err, fenced.ErrStaleToken) holds whichever guard refused.
//   - Every isolation level is safe for what is read after the fence; Check
//     refuses to follow a read that may be stale (ErrCheckNotFirst).
//   - Postgres shares fenced's fence table and statements: fenced and
//     sqlfence guards over one database see each other's tokens, and a table
//     under fenced.Guard.Protect accepts writes made through either.
//   - MySQL and MariaDB: InnoDB only, whose row lock is the fence; a fence
//     table of another engine is ErrUnsafeStorage. No DSN parameter is
//     required.
//   - SQLite: the database's write lock is the fence. The database must be a
//     file (ErrUnsafeStorage otherwise), and the DSN must set a busy timeout,
//     or a second writer fails at once with SQLITE_BUSY instead of waiting.
//   - The guard never retries: it cannot know whether fn may run twice. A
//     deadlock or a lock wait comes back wrapped and otherwise unchanged;
//     nothing was committed and the whole unit of work can be retried with
//     the same token.
//
// docs/fences.md names the servers and drivers each dialect needs and
// explains its upsert and lock, Check on each, DoAll, the codes to retry
// on and the tables, and lists the spans and metrics.
//
// # Errors
//
//	Situation                                        Error
//	bad database, dialect or option (see below)      ErrInvalid, from New
//	bad argument or Guard (see below)                ErrInvalid, before any round trip
//	ctx already done                                 ctx.Err(), wrapped, before any round trip
//	token lower than the highest recorded            ErrStaleToken, a *StaleTokenError (DoAll,
//	                                                   CheckAll: the first stale claim's)
//	Check after a read that may be stale             ErrCheckNotFirst; nothing recorded: roll back,
//	  (see Check: per dialect)                         begin again with Check first
//	fence table missing                              ErrNotMigrated, wrapping the driver's error
//	                                                   (SQLSTATE 42P01; MySQL 1146; SQLite "no such table")
//	fence table stored where it cannot fence:        ErrUnsafeStorage; nothing written
//	  MySQL: not InnoDB (Migrate, Do, Check);
//	  SQLite: not a file (Migrate)
//	database or connection failure, ctx ending       the driver's error wrapped with %w
//	fn returned an error                             that error, as it is; a refusal by a table
//	                                                   under fenced.Guard.Protect (Postgres) is the
//	                                                   driver's error, SQLSTATE RF002 or RF001:
//	                                                   fenced.Refusal maps it (it imports pgx)
//
// An error caused by ctx ending (ctx already done, or ending on the way)
// also wraps context.Cause(ctx) when it is not ctx.Err() itself, and says
// it: on a lock's context that is mutex.ErrLockLost, which errors.Is finds
// beside the driver's error.
//
// ErrInvalid is mutex.ErrInvalid, the one bad-input sentinel of redfence.
// New refuses a nil or typed-nil database, a Dialect other than the three
// and a bad WithTable name. Bad arguments of the calls are: a nil or zero
// Guard, a nil ctx, fn or tx, no claims or one resource claimed with two
// different tokens (DoAll, CheckAll; the error names the claim), a
// resource that is empty, longer than MaxResourceLen bytes, not valid
// UTF-8 or holds a NUL byte, and a negative token (tokens run from 0 to
// math.MaxInt64; the fence tables check token >= 0 too).
package sqlfence
