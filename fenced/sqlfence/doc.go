// Package sqlfence is fenced's Guard for database/sql: in the same
// transaction as a write, it rejects the write when it carries a fencing
// token lower than the highest one recorded for its resource, on
// PostgreSQL, MySQL (and MariaDB) or SQLite.
//
// The contract is fenced.Guard's: Do runs fn in a transaction that first
// records the token, and commits fn's writes only then; a lower token rolls
// back before fn runs and returns a *StaleTokenError (errors.Is
// ErrStaleToken); an equal token is accepted (the same holder may write
// twice); writers of one resource are serialised from the fence to the
// commit. The errors are fenced's own values (package fence), so
// errors.Is(err, fenced.ErrStaleToken) holds whichever guard refused.
//
// The package imports no driver: the caller opens the *sql.DB with the
// driver of its choice and says which Dialect it speaks. Importing sqlfence
// compiles neither pgx nor a MySQL or SQLite driver.
//
//	db, err := sql.Open("mysql", "app:secret@tcp(127.0.0.1:3306)/app")
//	...
//	g, err := sqlfence.New(db, sqlfence.MySQL)
//	...
//	err = g.Migrate(ctx) // once: creates redfence_fences
//	err = g.Do(ctx, "account:42", lk.Token(), func(ctx context.Context, tx *sql.Tx) error {
//		_, err := tx.ExecContext(ctx, "UPDATE accounts SET balance = ? WHERE id = 42", balance)
//		return err
//	})
//
// # Dialects
//
// Each dialect records the token with its database's own atomic upsert,
// the first statement of the transaction, and relies on the lock it takes
// being held until the transaction ends.
//
// Postgres: PostgreSQL through pgx's database/sql driver
// (github.com/jackc/pgx/v5/stdlib, driver name "pgx"). The guard sends
// fenced's statements word for word and uses the same fence table, so
// fenced and sqlfence guards over one database see each other's tokens, and
// a table protected by fenced.Guard.Protect accepts writes made through
// either. The upsert (INSERT … ON CONFLICT DO UPDATE … WHERE the recorded
// token is not higher … RETURNING) locks the resource's row whether or not
// it changes it. Every isolation level is safe for what is read after the
// fence: under READ COMMITTED (the default) a writer that waited on the row
// re-checks it once the lock is released; under REPEATABLE READ and
// SERIALIZABLE the same race ends in a serialization failure, SQLSTATE
// 40001. A read before the fence may be stale whatever the level: Check
// refuses to follow one (ErrCheckNotFirst).
//
// MySQL: MySQL 8.0.16 or later, or MariaDB 10.11 or later, through
// github.com/go-sql-driver/mysql, and the InnoDB engine only: the fence is
// InnoDB's row lock, and Migrate refuses a fence table of another engine
// (ErrUnsafeStorage). So do Do and Check, for a table altered after
// Migrate: a Guard reads the engine at its first call and then at most
// every ten seconds, in the call's own transaction. The upsert is INSERT … ON DUPLICATE KEY UPDATE keeping
// GREATEST of the two tokens; it takes an exclusive lock on the row
// whether or not it changes it, and, being a locking statement, reads the
// latest committed row rather than the transaction's snapshot, so every
// isolation level is safe, REPEATABLE READ (InnoDB's default) included, for
// what is read after the fence. A read before it, at REPEATABLE READ, took
// a snapshot that the previous holder's write may have overtaken: Check
// compares the fence row in the snapshot with the row as committed, and
// refuses (ErrCheckNotFirst) when they differ.
// MySQL has no RETURNING: when the count of affected rows does not prove
// the token was recorded (an update reports 2), a SELECT … FOR UPDATE reads
// the highest token under the lock the upsert holds. No DSN parameter is
// required (clientFoundRows and interpolateParams are fine). The resource
// column is a VARBINARY(1024) primary key, within InnoDB's 3072-byte key
// limit (a utf8mb4 VARCHAR(1024) is not); resources compare as bytes.
//
// SQLite: SQLite 3.35 or later (RETURNING), through modernc.org/sqlite
// (pure Go) or another driver. SQLite has one write lock for the whole
// database, and that lock is the fence: the upsert (INSERT … ON CONFLICT DO
// UPDATE … WHERE … RETURNING) is the transaction's first statement and a
// write, so SQLite takes the write lock at it and keeps it until the
// transaction ends, and every writer of the database, not only those of one
// resource, is serialised from the fence to the commit. The DSN must set a
// busy timeout (modernc: _pragma=busy_timeout(10000), or
// _busy_timeout=10000); without one a second writer fails at once with
// SQLITE_BUSY instead of waiting. The database must be a file, and Migrate
// refuses one that is not (ErrUnsafeStorage): each connection to a plain
// ":memory:" has its own, and a shared-cache one locks tables, so a second
// writer fails at once (SQLITE_LOCKED). WAL mode
// (_pragma=journal_mode(WAL)) lets readers run beside the writer. An immediate transaction (_txlock=immediate, which takes the
// write lock at BEGIN) is not required by Do, whose first statement takes
// it anyway; either way is safe. It matters for Check: a deferred
// transaction that read before calling Check cannot take the write lock
// while another connection holds it or has committed since that read, and
// fails at once with SQLITE_BUSY or SQLITE_BUSY_SNAPSHOT. Call Check first,
// or open the database with _txlock=immediate.
//
// # Several resources
//
// DoAll (and CheckAll, in a transaction of your own) fences one
// transaction on several resources, a Claim each with its own token, as
// fenced.Guard.DoAll does: the claims are recorded sorted by resource, as
// bytes, each once, whatever order the caller lists them in, so two such
// transactions take the fence rows they share in one order and never
// deadlock there (PostgreSQL and MySQL lock one row per resource; SQLite's
// first record takes the database's write lock for all of them); the
// first stale claim in that order refuses the whole transaction before
// fn runs, with that claim's *StaleTokenError. On PostgreSQL each claim is
// declared as Do's, so a table under fenced.Guard.Protect accepts the rows
// of every claimed resource. The fence tables are unchanged.
//
// On MySQL, CheckAll locks every claimed fence row before it compares any
// with the transaction's snapshot; Check after Check would take the
// snapshot at the first and could refuse a later resource whose previous
// holder committed while that Check waited (ErrCheckNotFirst).
//
// # Retrying
//
// A transaction the database ends to break a deadlock, or that waited too
// long for the fence, comes back from Do and Check wrapped with %w and
// otherwise unchanged, so errors.As finds the driver's error; nothing was
// committed and the whole unit of work can be retried with the same token:
//
//	Dialect   Retry on
//	Postgres  SQLSTATE 40001 (serialization_failure), 40P01 (deadlock_detected);
//	            55P03 (lock_not_available) if you set lock_timeout
//	MySQL     1213 (ER_LOCK_DEADLOCK, SQLSTATE 40001), 1205 (ER_LOCK_WAIT_TIMEOUT,
//	            after innodb_lock_wait_timeout); MariaDB with
//	            innodb_snapshot_isolation: 1020 (ER_CHECKREAD), for a
//	            transaction that read before the fence
//	SQLite    SQLITE_BUSY (5) and its extended codes, such as SQLITE_BUSY_SNAPSHOT (517)
//
// The guard itself never retries: it cannot know whether fn may run twice.
// A roll-back after an error runs through database/sql, which gives it no
// deadline: on a hung server only the driver's read timeout bounds it (set
// one in the DSN).
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
// resource that is empty, longer than MaxResourceLen (1024) bytes, not
// valid UTF-8 or holds a NUL byte, and a negative token (tokens run from 0
// to math.MaxInt64; the fence tables check token >= 0 too).
//
// # Telemetry
//
// Spans and instruments come from WithTracerProvider and WithMeterProvider
// (default: otel's globals), under the instrumentation scope
// "github.com/redfence/redfence/fenced/sqlfence" with the module's version,
// and carry fenced's names, so that one dashboard covers every SQL store
// (redisfence makes neither spans nor metrics):
// INTERNAL spans redfence.fenced.Do and redfence.fenced.Check with the
// attributes redfence.resource, redfence.token, redfence.outcome (accepted,
// stale, error) and redfence.highest; redfence.fenced.DoAll and
// redfence.fenced.CheckAll with redfence.resources and redfence.tokens (the
// claims in the order recorded), redfence.outcome, and, when a claim is
// stale, its redfence.resource and redfence.highest; and the counter
// redfence.fence.checks ({check}) by redfence.outcome, one per claim
// recorded. The statements are the driver's to trace.
//
// # Tables
//
// Migrate creates the fence table (default redfence_fences, WithTable to
// change it) if it is missing, one row per resource ever written:
//
//	Postgres  resource text PRIMARY KEY, token bigint, updated_at timestamptz (fenced's table)
//	MySQL     resource VARBINARY(1024) PRIMARY KEY, token BIGINT, updated_at DATETIME(6) (UTC), InnoDB
//	SQLite    resource TEXT PRIMARY KEY, token INTEGER, updated_at TEXT (UTC, ISO 8601)
//
// Delete rows of retired resources yourself if that matters.
package sqlfence
