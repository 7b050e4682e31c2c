// Package pgfirst holds the query by which the PostgreSQL guards (fenced,
// and sqlfence's Postgres dialect) refuse a Check that comes after a read
// in its transaction.
//
// A transaction that reads a row, then waits at the fence behind the
// resource's previous holder, then writes back what it read, undoes that
// holder's write: under READ COMMITTED (the default) nothing stops it.
// PostgreSQL keeps no count of a transaction's statements, but a read
// leaves a lock on each table it read, held until the transaction ends:
// ACCESS SHARE for a SELECT, ROW SHARE for SELECT … FOR UPDATE/SHARE.
// Writes take ROW EXCLUSIVE, and some read locks of their own that are
// not the caller's reads: a foreign key's check takes ROW SHARE on the
// table at the key's other end (FOR KEY SHARE of the rows it checks), and
// a table another fence protects has its trigger read that fence's table.
package pgfirst

import "github.com/redfence/redfence/internal/pgfence"

// ReadBefore reports (one boolean) whether the transaction read before
// the fence: whether it holds ACCESS SHARE or ROW SHARE on a table, view,
// materialised view or foreign table of its own database created after
// initdb (so not a catalog), other than
//   - the fence table, $1 quoted as an SQL name: the fence's own statements
//     read it, such as the stale path's SELECT … FOR UPDATE;
//   - a fence table the transaction declared a token to (another Guard's
//     Check or Do), which that fence's trigger reads;
//   - by ROW SHARE alone, a table that a foreign key links to a table the
//     transaction holds ROW EXCLUSIVE on (either end, the key's check): a
//     SELECT … FOR UPDATE/SHARE of such a table is therefore not seen;
//     a plain SELECT of it is.
//
// Indexes are left out: a read locks its table too. When the fence table
// does not exist, it reports false and the fence's statements say so.
var ReadBefore = `SELECT EXISTS (SELECT FROM pg_catalog.pg_locks l JOIN pg_catalog.pg_class c ON c.oid = l.relation
WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation'
	AND l.database = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database())
	AND l.mode IN ('AccessShareLock', 'RowShareLock') AND l.relation >= 16384
	AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
	AND l.relation IS DISTINCT FROM pg_catalog.to_regclass($1)
	AND coalesce(pg_catalog.current_setting(` + pgfence.Setting("l.relation") + `, true), '') = ''
	AND NOT (l.mode = 'RowShareLock' AND EXISTS (SELECT FROM pg_catalog.pg_constraint k
		WHERE k.contype = 'f' AND l.relation IN (k.conrelid, k.confrelid) AND EXISTS (SELECT FROM pg_catalog.pg_locks w
			WHERE w.pid = l.pid AND w.locktype = 'relation' AND w.mode = 'RowExclusiveLock'
				AND w.relation IN (k.conrelid, k.confrelid)))))`
