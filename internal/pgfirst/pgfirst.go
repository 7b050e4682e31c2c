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
// Writes (ROW EXCLUSIVE), such as another fence's upsert, are not reads.
package pgfirst

// ReadBefore reports (one boolean) whether the transaction holds a read
// lock on a relation of its own database created after initdb (so not a
// catalog) other than the fence table, $1 quoted as an SQL name, and its
// indexes: a table read by the fence's own statements, such as the stale
// path's SELECT … FOR UPDATE, is not the caller's read. When the fence
// table does not exist, it reports false and the fence's statements say so.
const ReadBefore = `SELECT EXISTS (SELECT FROM pg_catalog.pg_locks l
WHERE l.pid = pg_catalog.pg_backend_pid() AND l.locktype = 'relation'
	AND l.mode IN ('AccessShareLock', 'RowShareLock') AND l.relation >= 16384
	AND l.relation NOT IN (SELECT pg_catalog.to_regclass($1)
		UNION ALL SELECT i.indexrelid FROM pg_catalog.pg_index i WHERE i.indrelid = pg_catalog.to_regclass($1)))`
