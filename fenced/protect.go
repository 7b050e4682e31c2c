package fenced

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The settings a protected table's trigger reads. redfence.fence_<hash of
// the fence table> holds the tokens a transaction declared to that
// Guard's fence, a JSON object of resource to token: the fence upsert adds
// to it in its RETURNING, so only a token it recorded, transaction-local
// (set_config's true). redfence.bypass, set to a reason, lets an operator
// write without a token, on the record.
const settingBypass = "redfence.bypass"

// The SQLSTATEs of a protected table's refusals (class RF is not
// PostgreSQL's): a token lower than the highest recorded, and no token.
const (
	CodeStaleToken = "RF001"
	CodeNoToken    = "RF002"
)

// ErrNoToken is matched by the error for a write to a protected table
// whose transaction declared no token for the row's resource (see
// Protect); Refusal maps PostgreSQL's error to it.
var ErrNoToken = errors.New("fenced: no fencing token for the resource in this transaction")

// ProtectOption configures Protect.
type ProtectOption interface{ applyProtect(*protectConfig) }

type protectConfig struct{ bypassRole string }

type protectOptionFunc func(*protectConfig)

func (f protectOptionFunc) applyProtect(c *protectConfig) { f(c) }

// WithBypassRole restricts the bypass (see Protect) to members of role;
// without it any session that names a reason may bypass.
func WithBypassRole(role string) ProtectOption {
	return protectOptionFunc(func(c *protectConfig) { c.bypassRole = role })
}

// Protect makes table refuse every write that did not go through the
// Guard: a trigger checks each row an INSERT, UPDATE, DELETE, MERGE,
// INSERT … ON CONFLICT or COPY changed (an UPDATE both the old row's
// resource and the new one's) against the tokens this transaction declared
// to this Guard's fence through Do or Check, and fails the statement when
// the row's resource has none (SQLSTATE RF002, ErrNoToken) or a token
// lower than the highest recorded (RF001, ErrStaleToken); TRUNCATE, which
// names no rows, is refused. The check runs after the row is written
// (AFTER ROW), so it sees the row as stored: generated columns filled,
// other BEFORE triggers done. resource is a SQL expression over the row's
// columns that gives the resource its writes are fenced under, as passed
// to Do: for example `'account:' || id`. It is the developer's SQL, not
// input; it runs in the writer's session with the search path Protect ran
// with, so keep it independent of session settings (a timestamptz cast to
// text depends on TimeZone). Re-run Protect after altering the columns it
// reads (sessions that fired the trigger keep a plan of the old types). A
// transaction is meant to declare a few resources: each row's check reads
// all of its declarations.
//
// A partitioned table is protected with its partitions (row triggers are
// inherited; the TRUNCATE guard is put on each partition that exists: re-run
// Protect after adding one). A table with inheritance children is refused
// (ErrInvalid): protect each table instead.
//
// An operator can bypass it, on purpose and on the record: a transaction
// that sets redfence.bypass to a reason (SET LOCAL redfence.bypass =
// 'backfill, ticket 42') writes without a token, and each such statement
// adds a row (when, the session's user, table, operation, reason) to the
// audit table beside the fence table (its name with "_bypass") and sends a
// NOTICE. WithBypassRole restricts that to a role's members. Use SET LOCAL:
// a session-wide SET, an ALTER ROLE … SET or a pooled connection that keeps
// it would let later writers through under that reason.
//
// What it cannot stop: the table's owner or a superuser disabling the
// trigger (ALTER TABLE … DISABLE TRIGGER) or skipping triggers
// (session_replication_role = replica), writes through another database
// or a restored backup, rows a table held before it was attached as a
// partition, and a writer that sets the declared tokens itself, claiming a
// token it does not hold.
//
// Protect is idempotent (it replaces the trigger, with a new expression)
// and safe to run from several processes at once; it needs the fence
// table (Migrate) and takes a SHARE ROW EXCLUSIVE lock on table while it
// runs. Two Guards with different fence tables can both protect a table:
// a writer then needs a token in each. Errors are as for Migrate; a bad
// table name, an empty or unusable resource expression and a bad role are
// ErrInvalid, and an expression PostgreSQL cannot evaluate over the
// table's rows is refused before anything changes.
func (g *Guard) Protect(ctx context.Context, table, resource string, opts ...ProtectOption) error {
	if err := g.usable(ctx); err != nil {
		return err
	}
	var cfg protectConfig
	for _, o := range opts {
		if o != nil {
			o.applyProtect(&cfg)
		}
	}
	qt, err := quoteTable(table)
	if err != nil {
		return err
	}
	switch {
	case strings.TrimSpace(resource) == "" || strings.ContainsRune(resource, 0):
		return invalid("empty resource expression")
	case strings.Contains(resource, "$redfence$"):
		return invalid("the resource expression contains $redfence$, which quotes the trigger's body")
	case strings.ContainsAny(cfg.bypassRole, "$\x00"):
		return invalid("bypass role %q: a role name here has no '$' or NUL", clip(cfg.bypassRole))
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fenced: protect: %w", err)
	}
	err = pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('redfence.fenced.protect'))`); err != nil {
			return err
		}
		n, err := g.resolve(ctx, tx, qt, true)
		if err != nil {
			return err
		}
		if cfg.bypassRole != "" {
			if _, err := tx.Exec(ctx, `SELECT $1::regrole`, cfg.bypassRole); err != nil {
				return fmt.Errorf("%w: bypass role %q: %w", ErrInvalid, clip(cfg.bypassRole), err)
			}
		}
		// The expression must evaluate over the table's rows: a typo
		// fails here, not in the first write.
		if _, err := tx.Exec(ctx, `SELECT (`+resource+`)::text FROM (SELECT * FROM `+n.table+` LIMIT 0) AS _rf_row`); err != nil {
			return fmt.Errorf("%w: resource expression %q over %s: %w", ErrInvalid, clip(resource), n.table, err)
		}
		for _, q := range g.protectSQL(n, resource, cfg) {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotMigrated) {
			return err
		}
		return fmt.Errorf("fenced: protect %s: %w", clip(table), err)
	}
	return nil
}

// protectNames are the schema-qualified, quoted names Protect uses, so
// that no search path (a writer's, or one with a schema others can create
// objects in) changes what the triggers call.
type protectNames struct {
	fence     string // this Guard's fence table
	check     string // shared by the Guard's protected tables: one resource against the fence
	audit     string // shared: the bypass audit table
	record    string // shared: adds a statement to it
	table     string // the protected table
	rowFn     string // per table and Guard
	truncFn   string // per table and Guard
	rowTrig   string // trigger names, per Guard (unquoted schema-free identifiers)
	truncTrig string
	leaves    []string // a partitioned table's partitions, for the TRUNCATE guard
}

// resolve finds the schemas of the fence table and of table (quoted), and
// refuses what Protect cannot cover.
// Unprotect (protecting false) needs only the table's own names.
func (g *Guard) resolve(ctx context.Context, tx pgx.Tx, table string, protecting bool) (protectNames, error) {
	var n protectNames
	sum := sha1.Sum([]byte(g.name))
	h := hex.EncodeToString(sum[:4])
	in := func(schema, rel, suffix string) string { return pgx.Identifier{schema, short(rel, suffix)}.Sanitize() }
	if protecting {
		var fenceSchema, fenceRel string
		err := tx.QueryRow(ctx, `SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`, g.table).Scan(&fenceSchema, &fenceRel)
		if errors.Is(err, pgx.ErrNoRows) {
			return n, fmt.Errorf("%w: %s", ErrNotMigrated, g.table)
		}
		if err != nil {
			return n, err
		}
		n.fence = pgx.Identifier{fenceSchema, fenceRel}.Sanitize()
		n.check = in(fenceSchema, fenceRel, "_check")
		n.audit = in(fenceSchema, fenceRel, "_bypass")
		n.record = in(fenceSchema, fenceRel, "_bypass_record")
	}
	var schema, rel string
	var kind string
	var children int
	err := tx.QueryRow(ctx, `SELECT n.nspname, c.relname, c.relkind::text,
	(SELECT count(*) FROM pg_inherits i WHERE i.inhparent = c.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`, table).Scan(&schema, &rel, &kind, &children)
	if errors.Is(err, pgx.ErrNoRows) {
		return n, fmt.Errorf("%w: table %s does not exist", ErrInvalid, table)
	}
	if err != nil {
		return n, err
	}
	switch {
	case !protecting:
	case kind != "r" && kind != "p":
		return n, fmt.Errorf("%w: %s is not a table (relkind %s)", ErrInvalid, table, kind)
	case kind == "r" && children > 0:
		return n, fmt.Errorf("%w: %s has inheritance children, which its triggers would not cover: protect each table", ErrInvalid, table)
	}
	if kind == "p" {
		rows, err := tx.Query(ctx, `SELECT quote_ident(n.nspname) || '.' || quote_ident(c.relname)
FROM pg_partition_tree(to_regclass($1)) t JOIN pg_class c ON c.oid = t.relid JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE t.relid <> to_regclass($1)`, table)
		if err != nil {
			return n, err
		}
		if n.leaves, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return n, err
		}
	}
	n.table = pgx.Identifier{schema, rel}.Sanitize()
	n.rowFn = in(schema, rel, "_rf_row_"+h)
	n.truncFn = in(schema, rel, "_rf_truncate_"+h)
	n.rowTrig = "redfence_fence_" + h
	n.truncTrig = "redfence_truncate_" + h
	return n, nil
}

// protectSQL is what Protect runs, in order, once resolve has the names.
func (g *Guard) protectSQL(n protectNames, resource string, cfg protectConfig) []string {
	bypass := `btrim(coalesce(current_setting('` + settingBypass + `', true), '')) <> ''`
	if cfg.bypassRole != "" {
		bypass += ` AND pg_has_role(current_user, ` + quoteLiteral(cfg.bypassRole) + `, 'MEMBER')`
	}
	// Shared functions run with the rights of who ran Protect (SECURITY
	// DEFINER) on a search path nobody else can add to, and name every
	// object with its schema: a writer needs no rights on the fence or
	// audit table to be refused or audited, and cannot redirect either.
	definer := ` SECURITY DEFINER SET search_path = pg_catalog, pg_temp`
	audit := `CREATE TABLE IF NOT EXISTS ` + n.audit + ` (
	at         timestamptz NOT NULL DEFAULT now(),
	txid       bigint      NOT NULL,
	username   text        NOT NULL,
	table_name text        NOT NULL,
	operation  text        NOT NULL,
	reason     text        NOT NULL
)`
	// record audits one statement of a bypass, once (the marker), with the
	// session's user and the reason read here, not passed in.
	record := `CREATE OR REPLACE FUNCTION ` + n.record + `(_table text, _op text) RETURNS void LANGUAGE plpgsql` + definer + ` AS $redfence$
DECLARE
	_reason text := btrim(coalesce(current_setting('` + settingBypass + `', true), ''));
	_mark text := txid_current()::text || ' ' || statement_timestamp()::text || ' ' || _table || ' ' || _op;
BEGIN
	IF _reason = '' OR current_setting('redfence.audited', true) IS NOT DISTINCT FROM _mark THEN
		RETURN;
	END IF;
	PERFORM set_config('redfence.audited', _mark, true);
	INSERT INTO ` + n.audit + ` (txid, username, table_name, operation, reason)
	VALUES (txid_current(), session_user, _table, _op, _reason);
	RAISE NOTICE 'redfence: % on % without a fencing token (bypass: %)', _op, _table, _reason;
END
$redfence$`
	check := `CREATE OR REPLACE FUNCTION ` + n.check + `(_res text, _table text) RETURNS void LANGUAGE plpgsql` + definer + ` AS $redfence$
DECLARE
	_tok bigint;
	_high bigint;
BEGIN
	IF _res IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
			MESSAGE = format('redfence: a row of protected table %s has a NULL resource', _table),
			DETAIL = json_build_object('table', _table)::text;
	END IF;
	_tok := (nullif(current_setting('` + g.setting + `', true), '')::jsonb ->> _res)::bigint;
	IF _tok IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
			MESSAGE = format('redfence: no fencing token for resource %s in this transaction, writing protected table %s', left(_res, 64), _table),
			DETAIL = json_build_object('resource', _res, 'table', _table)::text,
			HINT = 'write through fenced.Guard.Do or Check with the lock''s token';
	END IF;
	SELECT token INTO _high FROM ` + n.fence + ` WHERE resource = _res;
	IF _high > _tok THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeStaleToken + `',
			MESSAGE = format('redfence: stale token %s for resource %s: %s was already accepted', _tok, left(_res, 64), _high),
			DETAIL = json_build_object('resource', _res, 'table', _table, 'token', _tok, 'highest', _high)::text;
	END IF;
END
$redfence$`
	// The row function holds the resource expression as static SQL,
	// planned once per session, on the search path Protect ran with.
	row := `CREATE OR REPLACE FUNCTION ` + n.rowFn + `() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $redfence$
DECLARE
	_rf_table text := quote_ident(TG_TABLE_SCHEMA) || '.' || quote_ident(TG_TABLE_NAME);
	_rf_old text;
	_rf_new text;
BEGIN
	IF ` + bypass + ` THEN
		PERFORM ` + n.record + `(_rf_table, TG_OP);
		RETURN NULL;
	END IF;
	IF TG_OP <> 'INSERT' THEN
		SELECT (` + resource + `) INTO _rf_old FROM (SELECT OLD.*) AS _rf_row;
		PERFORM ` + n.check + `(_rf_old, _rf_table);
	END IF;
	IF TG_OP <> 'DELETE' THEN
		SELECT (` + resource + `) INTO _rf_new FROM (SELECT NEW.*) AS _rf_row;
		IF TG_OP = 'INSERT' OR _rf_new IS DISTINCT FROM _rf_old THEN
			PERFORM ` + n.check + `(_rf_new, _rf_table);
		END IF;
	END IF;
	RETURN NULL;
END
$redfence$`
	trunc := `CREATE OR REPLACE FUNCTION ` + n.truncFn + `() RETURNS trigger LANGUAGE plpgsql AS $redfence$
DECLARE
	_rf_table text := quote_ident(TG_TABLE_SCHEMA) || '.' || quote_ident(TG_TABLE_NAME);
BEGIN
	IF ` + bypass + ` THEN
		PERFORM ` + n.record + `(_rf_table, TG_OP);
		RETURN NULL;
	END IF;
	RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
		MESSAGE = format('redfence: TRUNCATE of protected table %s needs the bypass (SET LOCAL ` + settingBypass + ` = ''reason'')', _rf_table),
		DETAIL = json_build_object('table', _rf_table)::text;
END
$redfence$`
	qs := []string{audit, record, check, row, trunc,
		`CREATE OR REPLACE TRIGGER ` + n.rowTrig + ` AFTER INSERT OR UPDATE OR DELETE ON ` + n.table + ` FOR EACH ROW EXECUTE FUNCTION ` + n.rowFn + `()`,
	}
	for _, t := range append([]string{n.table}, n.leaves...) {
		qs = append(qs, `CREATE OR REPLACE TRIGGER `+n.truncTrig+` BEFORE TRUNCATE ON `+t+` FOR EACH STATEMENT EXECUTE FUNCTION `+n.truncFn+`()`)
	}
	return qs
}

// Unprotect removes this Guard's triggers and per-table functions from
// table (and its partitions); the Guard's shared functions and its audit
// table stay, for other tables and for the record. It is idempotent; a
// table that no longer exists is fine. Protect and Unprotect need
// PostgreSQL 14 or later (CREATE OR REPLACE TRIGGER).
func (g *Guard) Unprotect(ctx context.Context, table string) error {
	if err := g.usable(ctx); err != nil {
		return err
	}
	qt, err := quoteTable(table)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fenced: unprotect: %w", err)
	}
	err = pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('redfence.fenced.protect'))`); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, qt).Scan(&exists); err != nil || !exists {
			return err
		}
		n, err := g.resolve(ctx, tx, qt, false)
		if err != nil {
			return err
		}
		qs := []string{`DROP TRIGGER IF EXISTS ` + n.rowTrig + ` ON ` + n.table}
		for _, t := range append([]string{n.table}, n.leaves...) {
			qs = append(qs, `DROP TRIGGER IF EXISTS `+n.truncTrig+` ON `+t)
		}
		qs = append(qs, `DROP FUNCTION IF EXISTS `+n.rowFn+`()`, `DROP FUNCTION IF EXISTS `+n.truncFn+`()`)
		for _, q := range qs {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fenced: unprotect %s: %w", clip(table), err)
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

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// Refusal maps a protected table's refusal to this package's errors: a
// stale token to a *StaleTokenError (errors.Is ErrStaleToken), a missing
// one to an error matching ErrNoToken. Both also wrap err, so errors.As
// still finds the *pgconn.PgError. Any other err gives nil. Do applies it
// to fn's error and to the commit's; a writer of its own can call it.
func Refusal(err error) error {
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || (pg.Code != CodeStaleToken && pg.Code != CodeNoToken) {
		return nil
	}
	var d struct {
		Resource string `json:"resource"`
		Table    string `json:"table"`
		Token    int64  `json:"token"`
		Highest  int64  `json:"highest"`
	}
	_ = json.Unmarshal([]byte(pg.Detail), &d)
	if pg.Code == CodeStaleToken {
		return &refusal{mapped: &StaleTokenError{Resource: d.Resource, Token: d.Token, Highest: d.Highest}, table: d.Table, err: err}
	}
	return &refusal{mapped: ErrNoToken, resource: d.Resource, table: d.Table, err: err}
}

// refusal is a protected table's refusal: mapped (ErrNoToken or a
// *StaleTokenError) and the database's error.
type refusal struct {
	mapped          error
	resource, table string
	err             error
}

func (r *refusal) Error() string {
	msg := r.mapped.Error()
	if r.resource != "" {
		msg += fmt.Sprintf(" (resource %q)", clip(r.resource))
	}
	if r.table != "" {
		msg += " refused by the trigger on " + r.table
	}
	return msg
}

func (r *refusal) Unwrap() []error { return []error{r.mapped, r.err} }
