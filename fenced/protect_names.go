package fenced

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// protectNames are the schema-qualified, quoted names Protect uses. Every
// name it makes derives from the fence table as resolved, its schema and
// name, never from the name the Guard was configured with: two fence
// tables of one name in two schemas get triggers of their own, and two
// names for one table the same.
type protectNames struct {
	fence string // the Guard's fence table
	audit string // beside it: the bypass audit table
	table string // the protected table
	kind  string // its relkind: r (a table) or p (partitioned)
	owner string // its owner, quoted
	// fenceOwner is the fence table's owner, quoted.
	fenceOwner string
	me         string // the role running Protect, quoted
	fn         string // the trigger function, per table and fence
	trig       string // the prefix of the triggers' names, per fence (unquoted)
	// legacyCheck and legacyRecord are the functions earlier versions
	// shared between a fence's tables.
	legacyCheck, legacyRecord string
	schema, rel               string   // the table's, unquoted
	children                  int      // inheritance children of a table
	members                   []member // a partitioned table's partitions, every level
	// legacy are the triggers an earlier version made for this fence on
	// the table: the hash in their names and their row function.
	legacy [][2]string
}

// member is a partition: its quoted name and relkind (r, p or f).
type member struct{ name, kind string }

// missingTable is ErrInvalid for Protect, and nothing to do for
// Unprotect.
type missingTable struct{ table string }

func (m *missingTable) Error() string {
	return fmt.Sprintf("%v: table %s does not exist", ErrInvalid, m.table)
}
func (m *missingTable) Unwrap() error { return ErrInvalid }

// resolve finds the fence table and table, on the session's search path.
func (g *Guard) resolve(ctx context.Context, tx pgx.Tx, table string) (protectNames, error) {
	var n protectNames
	const q = `SELECT n.nspname, c.relname, c.relkind::text, quote_ident(pg_get_userbyid(c.relowner)), quote_ident(current_user)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`
	var fenceSchema, fenceRel, fenceKind string
	err := tx.QueryRow(ctx, q, g.table).Scan(&fenceSchema, &fenceRel, &fenceKind, &n.fenceOwner, &n.me)
	if errors.Is(err, pgx.ErrNoRows) {
		return n, fmt.Errorf("%w: %s", ErrNotMigrated, g.table)
	}
	if err != nil {
		return n, err
	}
	if fenceKind != "r" {
		return n, fmt.Errorf("%w: fence table %s is not a plain table (relkind %s)", ErrInvalid, g.table, fenceKind)
	}
	in := func(schema, rel, suffix string) string { return pgx.Identifier{schema, short(rel, suffix)}.Sanitize() }
	n.fence = pgx.Identifier{fenceSchema, fenceRel}.Sanitize()
	n.audit = in(fenceSchema, fenceRel, "_bypass")
	n.legacyCheck = in(fenceSchema, fenceRel, "_check")
	n.legacyRecord = in(fenceSchema, fenceRel, "_bypass_record")
	sum := sha1.Sum([]byte(n.fence))
	h := hex.EncodeToString(sum[:4])

	err = tx.QueryRow(ctx, q, table).Scan(&n.schema, &n.rel, &n.kind, &n.owner, &n.me)
	if errors.Is(err, pgx.ErrNoRows) {
		return n, &missingTable{table}
	}
	if err != nil {
		return n, err
	}
	n.table = pgx.Identifier{n.schema, n.rel}.Sanitize()
	n.fn = in(n.schema, n.rel, "_rf_"+h)
	n.trig = "redfence_" + h
	return n, nil
}

// readTree reads, under the table's lock, its inheritance children and
// its partitions.
func (n *protectNames) readTree(ctx context.Context, tx pgx.Tx) error {
	if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = $1::text::regclass`, n.table).Scan(&n.children); err != nil {
		return err
	}
	if n.kind != "p" {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname), c.relkind::text
FROM pg_partition_tree($1::text::regclass) t JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE t.relid <> $1::text::regclass ORDER BY t.level, 1`, n.table)
	if err != nil {
		return err
	}
	n.members, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (m member, err error) {
		return m, r.Scan(&m.name, &m.kind)
	})
	return err
}

// protectable refuses what Protect cannot cover.
func (n protectNames) protectable() error {
	switch {
	case n.kind != "r" && n.kind != "p":
		return fmt.Errorf("%w: %s is not a table (relkind %s)", ErrInvalid, n.table, n.kind)
	case n.kind == "r" && n.children > 0:
		return fmt.Errorf("%w: %s has inheritance children, which its triggers would not cover: protect each table", ErrInvalid, n.table)
	}
	return nil
}

// short is rel+suffix, shortened with a hash of rel when it would pass
// PostgreSQL's 63 bytes, so that two long names do not meet.
func short(rel, suffix string) string {
	if len(rel)+len(suffix) <= 63 {
		return rel + suffix
	}
	sum := sha1.Sum([]byte(rel))
	keep := rel[:63-len(suffix)-9]
	return strings.ToValidUTF8(keep, "") + "_" + hex.EncodeToString(sum[:4]) + suffix
}
