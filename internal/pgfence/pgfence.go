// Package pgfence is the SQL of PostgreSQL's fence, one text for the two
// guards that send it: fenced (pgx) and sqlfence's Postgres dialect
// (database/sql). Both then use one fence table, and a token either
// records is declared alike, so that a table fenced.Guard.Protect guards
// accepts the writes of both. Placeholders are $1 (the resource) and $2
// (the token); table is the fence table, quoted. It imports only the
// standard library.
package pgfence

import "strings"

// UndefinedTable is the SQLSTATE of a missing fence table.
const UndefinedTable = "42P01"

// MigrateLock serialises Migrate's CREATE TABLE IF NOT EXISTS across
// processes (concurrent ones can collide on the catalog), until the
// transaction ends.
const MigrateLock = `SELECT pg_advisory_xact_lock(hashtext('redfence.fenced.migrate'))`

// Create makes the fence table if it is missing.
func Create(table string) string {
	return `CREATE TABLE IF NOT EXISTS ` + table + ` (
	resource   text        PRIMARY KEY,
	token      bigint      NOT NULL CHECK (token >= 0),
	updated_at timestamptz NOT NULL DEFAULT now()
)`
}

// Upsert records $2 for $1 unless a higher token is recorded, and then
// returns the token and declares it (Declare); it returns no row when a
// higher token is recorded. It locks the resource's row either way, until
// the transaction ends. It declares to the table the row is in
// (f.tableoid), not to the name the session used for it: two fence tables
// of one name in two schemas are two fences, two names for one table one.
func Upsert(table string) string {
	return `INSERT INTO ` + table + ` AS f (resource, token) VALUES ($1, $2)
ON CONFLICT (resource) DO UPDATE SET token = EXCLUDED.token, updated_at = now()
WHERE f.token <= EXCLUDED.token
RETURNING token, ` + Declare("f.tableoid")
}

// Highest reads the token recorded for $1; after Upsert, under its lock.
func Highest(table string) string {
	return `SELECT token FROM ` + table + ` WHERE resource = $1`
}

// Setting is an SQL expression: the name of the setting that holds the
// tokens a transaction declared to the fence table whose OID is the SQL
// expression oid, a JSON object of resource to token. One per fence table,
// so that a token recorded in one Guard's fence never passes another's
// trigger.
func Setting(oid string) string {
	return `'redfence.fence_' || (` + oid + `)::oid::text`
}

// Declare adds $1 → $2 to the tokens declared to the fence table whose OID
// is the SQL expression oid, until the transaction ends (set_config's
// true: a rolled-back savepoint takes it back).
func Declare(oid string) string {
	setting := Setting(oid)
	return `set_config(` + setting + `, (coalesce(nullif(current_setting(` + setting + `, true), ''), '{}')::jsonb || jsonb_build_object($1::text, $2::bigint))::text, true)`
}

// Quote quotes the parts of a name ("name" or "schema", "name") as
// identifiers, dot-separated, as pgx.Identifier.Sanitize does.
func Quote(parts ...string) string {
	q := make([]string, len(parts))
	for i, p := range parts {
		q[i] = `"` + strings.ReplaceAll(strings.ReplaceAll(p, `"`, `""`), "\x00", "") + `"`
	}
	return strings.Join(q, ".")
}
