package fenced

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// findLegacy finds on n.table what earlier versions of Protect made for
// n's fence: triggers redfence_fence_<h> (row) and redfence_truncate_<h>,
// h a hash of the fence's configured name, and their functions. A trigger
// is the fence's when its function calls the fence's shared check
// function, which names the fence table's schema and name; another
// fence's, even of the same configured name, stays. It runs before the
// table's lock, so that the lock taken is the one dropping them needs:
// every version of Protect made its triggers under the advisory lock the
// caller holds, so none appears in between.
func findLegacy(ctx context.Context, tx pgx.Tx, n *protectNames) error {
	rows, err := tx.Query(ctx, `SELECT substr(t.tgname, 16), quote_ident(pn.nspname) || '.' || quote_ident(p.proname)
FROM pg_trigger t JOIN pg_proc p ON p.oid = t.tgfoid JOIN pg_namespace pn ON pn.oid = p.pronamespace
WHERE t.tgrelid = $1::text::regclass AND t.tgparentid = 0 AND t.tgname ~ '^redfence_fence_[0-9a-f]{8}$' AND strpos(p.prosrc, $2) > 0`,
		n.table, n.legacyCheck)
	if err != nil {
		return err
	}
	n.legacy, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (o [2]string, err error) {
		return o, r.Scan(&o[0], &o[1])
	})
	return err
}

// dropLegacy removes what findLegacy found, under the table's ACCESS
// EXCLUSIVE lock (DROP TRIGGER's). The shared functions go when no
// function calls them any more. What is left names its objects with their
// schemas, so the search path does not matter here.
func dropLegacy(ctx context.Context, tx pgx.Tx, n protectNames) error {
	var qs []string
	for _, o := range n.legacy {
		h, rowFn := o[0], o[1]
		// Dropping the table's row trigger drops the partitions' copies.
		qs = append(qs, `DROP TRIGGER redfence_fence_`+h+` ON `+n.table, `DROP FUNCTION `+rowFn+`()`)
		for _, t := range append([]string{n.table}, memberNames(n.members)...) {
			qs = append(qs, `DROP TRIGGER IF EXISTS redfence_truncate_`+h+` ON `+t)
		}
		qs = append(qs, `DROP FUNCTION IF EXISTS `+pgx.Identifier{n.schema, short(n.rel, "_rf_truncate_"+h)}.Sanitize()+`()`)
	}
	if err := execAll(ctx, tx, qs); err != nil {
		return err
	}
	for _, shared := range []string{n.legacyCheck, n.legacyRecord} {
		_, err := tx.Exec(ctx, `DO $redfence$ BEGIN
	IF to_regprocedure(`+quoteLiteral(shared+"(text,text)")+`) IS NOT NULL AND NOT EXISTS (
		SELECT FROM pg_proc WHERE strpos(prosrc, `+quoteLiteral(shared)+`) > 0) THEN
		DROP FUNCTION `+shared+`(text, text);
	END IF;
END $redfence$`)
		if err != nil {
			return err
		}
	}
	return nil
}
