// Package pgdriver is a backend for mutex.Locker whose locks are lease rows
// of one PostgreSQL table, for teams that run PostgreSQL and nothing else.
//
//	d, err := pgdriver.New(pool, pgdriver.WithSchema("redfence"))
//	err = d.Migrate(ctx) // once per deployment; safe from many replicas at once
//	locker, err := mutex.New(d)
//	lk, err := locker.Lock(ctx, "account:42")
//	tx, err := pool.Begin(ctx)
//	err = d.Check(ctx, tx, lk) // the lock and the fence are one
//
// A write that fits in one transaction can take its keys in it instead:
//
//	tokens, err := d.LockTx(ctx, tx, "account:42", "account:7")
//
// or queue it in a pgx.Batch with the transaction's first statements, one
// round trip for both (QueueLockTx).
//
// # Guarantees and assumptions
//
//   - A lease is timed by the database's clock (clock_timestamp()), never a
//     client's; a token is the key's last one plus one and at least the
//     database's time in µs, so it never goes back across restarts,
//     client failovers and released keys (the row keeps the last token).
//   - Acquire, Extend, Release, TTL and Abandon are each one autocommit
//     statement comparing owner and token: they need no session state, so
//     they work through PgBouncer in transaction mode and survive a
//     recycled or killed connection. Behind PgBouncer before 1.21, give pgx
//     default_query_exec_mode=exec (or simple_protocol): no prepared
//     statement outlives a transaction there.
//   - Check, first in a write transaction, commits the writes only while
//     the hold's lease is live and its token current, and row-locks the
//     lease until the transaction ends: a competing Acquire waits for it
//     instead of taking the key.
//   - LockTx takes keys for the life of the transaction in one statement: a
//     new token each (above every earlier one, the Locker's too) and their
//     rows locked until commit or rollback, when the keys are free with
//     nothing to release. Locker acquisitions and other LockTx calls wait
//     for it; a key a live lease holds is refused (ErrNotAcquired). It has
//     no renewal and no loss signal: the transaction is the hold, and its
//     tokens are the transaction's (a rollback undoes them).
//   - A release NOTIFYs. With WithListener (a session to PostgreSQL itself,
//     one connection per Driver) waiters LISTEN and take a freed key at
//     once; without it, as behind PgBouncer's transaction mode, they poll,
//     each at most every lease the holder has left.
//   - Package runner works over it: a slot claim is one statement that
//     row-locks the job's claim, and the runner counts slots on the
//     database's clock (ServerTime), whatever the replicas' clocks say.
//     Package election keeps its term journal in two tables; its
//     observers poll them (every 100 ms), as nothing is pushed.
//   - Semaphores and read-write locks (mutex.NewSemaphore, NewRWMutex) are
//     rows of four more tables; each call is one PL/pgSQL function that
//     locks the semaphore's or lock's row before it reads the holders.
//
// docs/pgdriver.md explains the table, the check, waking waiters and
// PgBouncer; examples/pglock runs the lock and its check on a throwaway
// PostgreSQL.
//
// # Errors
//
//	situation                                      error
//	nil db, a bad option (New)                     ErrInvalid (mutex.ErrInvalid)
//	Check: nil ctx, tx or hold                     ErrInvalid
//	Check: the hold's lease is not live            ErrNotHeld: roll back
//	LockTx: nil ctx or tx, no keys, a bad key      ErrInvalid
//	LockTx: a live lease holds a key               mutex.ErrNotAcquired: roll back
//	a statement fails or times out                 wraps mutex.ErrUnavailable and pgx's error
//	the table does not exist (run Migrate)         wraps PostgreSQL's 42P01 error
package pgdriver
