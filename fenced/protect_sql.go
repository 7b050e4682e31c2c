package fenced

import "github.com/redfence/redfence/internal/pgfence"

// The statement triggers' events, each its own trigger: PostgreSQL gives
// transition tables only to a trigger of one event.
var statementEvents = []struct{ event, referencing string }{
	{"insert", "NEW TABLE AS _rf_new"},
	{"update", "OLD TABLE AS _rf_old NEW TABLE AS _rf_new"},
	{"delete", "OLD TABLE AS _rf_old"},
}

// protectSQL is what Protect runs, in order, once the names are resolved
// and the table locked.
//
// The table and each partition get a statement trigger per event, over its
// transition tables (a statement on the table sees its partitions' rows
// there), and the TRUNCATE guard. A partitioned table also gets a row
// trigger, which PostgreSQL copies to every partition, those made later
// too: it is switched off on the partitions that have statement triggers,
// and checks, row by row, the writes made straight to one that has none.
func protectSQL(n protectNames, resource string, cfg protectConfig) []string {
	qs := []string{
		`CREATE TABLE IF NOT EXISTS ` + n.audit + ` (
	at         timestamptz NOT NULL DEFAULT now(),
	txid       bigint      NOT NULL,
	username   text        NOT NULL,
	table_name text        NOT NULL,
	operation  text        NOT NULL,
	reason     text        NOT NULL
)`,
		// The trigger function runs with its owner's rights, and it writes
		// the audit: nobody else may call it. The table's owner may, to
		// add partitions, which copies the row trigger.
		triggerFunction(n, resource, cfg.bypassRole),
		`REVOKE ALL ON FUNCTION ` + n.fn + `() FROM PUBLIC`,
	}
	if n.owner != n.me {
		qs = append(qs, `GRANT EXECUTE ON FUNCTION `+n.fn+`() TO `+n.owner)
	}
	covered := []string{n.table}
	for _, m := range n.members {
		if m.kind != "f" { // a foreign table has no transition tables
			covered = append(covered, m.name)
		}
	}
	for _, t := range covered {
		for _, e := range statementEvents {
			qs = append(qs, `CREATE OR REPLACE TRIGGER `+n.trig+`_`+e.event+` AFTER `+e.event+` ON `+t+
				` REFERENCING `+e.referencing+` FOR EACH STATEMENT EXECUTE FUNCTION `+n.fn+`()`)
		}
	}
	for _, t := range append([]string{n.table}, memberNames(n.members)...) {
		qs = append(qs, `CREATE OR REPLACE TRIGGER `+n.trig+`_truncate BEFORE TRUNCATE ON `+t+` FOR EACH STATEMENT EXECUTE FUNCTION `+n.fn+`()`)
	}
	if n.kind == "p" {
		qs = append(qs, `CREATE OR REPLACE TRIGGER `+n.trig+`_row AFTER INSERT OR UPDATE OR DELETE ON `+n.table+
			` FOR EACH ROW EXECUTE FUNCTION `+n.fn+`()`)
		for _, m := range n.members {
			if m.kind == "r" { // a partitioned member passes it on, on, to partitions made later
				qs = append(qs, `ALTER TABLE `+m.name+` DISABLE TRIGGER `+n.trig+`_row`)
			}
		}
	}
	return qs
}

// unprotectSQL removes what protectSQL made on the table, but the audit.
func unprotectSQL(n protectNames) []string {
	var qs []string
	for _, t := range append([]string{n.table}, memberNames(n.members)...) {
		for _, e := range []string{"insert", "update", "delete", "truncate"} {
			qs = append(qs, `DROP TRIGGER IF EXISTS `+n.trig+`_`+e+` ON `+t)
		}
	}
	// Dropping the table's row trigger drops the partitions' copies.
	return append(qs, `DROP TRIGGER IF EXISTS `+n.trig+`_row ON `+n.table, `DROP FUNCTION IF EXISTS `+n.fn+`()`)
}

func memberNames(ms []member) []string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.name
	}
	return names
}

// triggerFunction is the one function the table's triggers call. It runs
// as its owner (SECURITY DEFINER: a writer needs no rights on the fence or
// the audit table, and cannot call it) on a search path nobody else can
// add to, and names every object of ours with its schema: no search path
// and no object another user creates changes what it calls. Columns win
// over PL/pgSQL's variables in the user's expression (use_column), which
// reads _rf_row alone; our own queries read no user column.
//
// A statement's check collects the distinct resources of its rows, reads
// the declared tokens once and compares them with the fence's in one join.
func triggerFunction(n protectNames, resource, bypassRole string) string {
	bypass := `_rf_reason <> ''`
	if bypassRole != "" {
		bypass += ` AND pg_has_role(session_user, ` + quoteLiteral(bypassRole) + `, 'MEMBER')`
	}
	res := `(` + resource + `)::text`
	return `CREATE OR REPLACE FUNCTION ` + n.fn + `() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $redfence$
#variable_conflict use_column
DECLARE
	_rf_table text := quote_ident(TG_TABLE_SCHEMA) || '.' || quote_ident(TG_TABLE_NAME);
	_rf_reason text := btrim(coalesce(current_setting('` + settingBypass + `', true), ''));
	_rf_declared jsonb;
	_rf_res text[];
	_rf_bad record;
BEGIN
	IF ` + bypass + ` THEN
		INSERT INTO ` + n.audit + ` (txid, username, table_name, operation, reason)
		VALUES (txid_current(), session_user, _rf_table, TG_OP, _rf_reason);
		RAISE NOTICE 'redfence: % on % without a fencing token (bypass: %)', TG_OP, _rf_table, _rf_reason;
		RETURN NULL;
	END IF;
	IF TG_OP = 'TRUNCATE' THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
			MESSAGE = format('redfence: TRUNCATE of protected table %s needs the bypass (SET LOCAL ` + settingBypass + ` = ''reason'')', _rf_table),
			DETAIL = json_build_object('table', _rf_table)::text;
	ELSIF TG_LEVEL = 'ROW' THEN -- a partition added since Protect
		IF TG_OP <> 'INSERT' THEN
			_rf_res := ARRAY(SELECT ` + res + ` FROM (SELECT OLD.*) AS _rf_row);
		END IF;
		IF TG_OP <> 'DELETE' THEN
			_rf_res := _rf_res || ARRAY(SELECT ` + res + ` FROM (SELECT NEW.*) AS _rf_row);
		END IF;
	ELSIF TG_OP = 'INSERT' THEN
		_rf_res := ARRAY(SELECT DISTINCT ` + res + ` FROM _rf_new AS _rf_row);
	ELSIF TG_OP = 'UPDATE' THEN
		_rf_res := ARRAY(SELECT ` + res + ` FROM _rf_old AS _rf_row UNION SELECT ` + res + ` FROM _rf_new AS _rf_row);
	ELSE
		_rf_res := ARRAY(SELECT DISTINCT ` + res + ` FROM _rf_old AS _rf_row);
	END IF;
	_rf_declared := nullif(current_setting(` + pgfence.Setting("to_regclass("+quoteLiteral(n.fence)+")") + `, true), '')::jsonb;
	SELECT r.res, d.tok, f.token AS high INTO _rf_bad
	FROM unnest(_rf_res) AS r(res)
	CROSS JOIN LATERAL (SELECT (_rf_declared ->> r.res)::bigint) AS d(tok)
	LEFT JOIN ` + n.fence + ` AS f ON f.resource = r.res
	WHERE r.res IS NULL OR d.tok IS NULL OR f.token > d.tok
	ORDER BY r.res IS NOT NULL, d.tok IS NOT NULL
	LIMIT 1;
	IF NOT FOUND THEN
		RETURN NULL;
	ELSIF _rf_bad.res IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
			MESSAGE = format('redfence: a row of protected table %s has a NULL resource', _rf_table),
			DETAIL = json_build_object('table', _rf_table)::text;
	ELSIF _rf_bad.tok IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
			MESSAGE = format('redfence: no fencing token for resource %s in this transaction, writing protected table %s', left(_rf_bad.res, 64), _rf_table),
			DETAIL = json_build_object('resource', _rf_bad.res, 'table', _rf_table)::text,
			HINT = 'write through fenced.Guard.Do or Check with the lock''s token; an operator may bypass on the record: SET LOCAL redfence.bypass = ''<why>'' (audited beside the fence table)';
	END IF;
	RAISE EXCEPTION USING ERRCODE = '` + CodeStaleToken + `',
		MESSAGE = format('redfence: stale token %s for resource %s: %s was already accepted', _rf_bad.tok, left(_rf_bad.res, 64), _rf_bad.high),
		DETAIL = json_build_object('resource', _rf_bad.res, 'table', _rf_table, 'token', _rf_bad.tok, 'highest', _rf_bad.high)::text;
END
$redfence$`
}
