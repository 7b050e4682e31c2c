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

// The settings a protected table's trigger reads, both transaction- or
// session-scoped custom settings: redfence.fence holds the tokens this
// transaction declared, a JSON object of resource to token (the fence
// upsert adds to it, in its RETURNING, so only a token it recorded);
// redfence.bypass, when set to a reason, lets an operator write without a
// token, and that is audited.
const (
	settingFence  = "redfence.fence"
	settingBypass = "redfence.bypass"
	declare       = `set_config('` + settingFence + `', (coalesce(nullif(current_setting('` + settingFence + `', true), ''), '{}')::jsonb || jsonb_build_object($1::text, $2::bigint))::text, true)`
)

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
// Guard: a trigger checks each row an INSERT, UPDATE, DELETE, INSERT … ON
// CONFLICT or COPY changes (an UPDATE both the old row's resource and the
// new one's) against the tokens this transaction declared through Do or
// Check, and refuses the statement when the row's resource has none
// (SQLSTATE RF002, ErrNoToken) or a token lower than the highest recorded
// (RF001, ErrStaleToken); TRUNCATE, which names no rows, is refused
// outright. resource is a SQL expression over the row's columns that gives
// the resource its writes are fenced under, as passed to Do: for example
// `'account:' || id`. It is SQL written by the developer, not input: it
// goes into the trigger function as it is.
//
// An operator can bypass it, on purpose and on the record: a session or
// transaction that sets redfence.bypass to a reason (SET LOCAL
// redfence.bypass = 'backfill, ticket 42') writes without a token, and
// each such statement adds a row (when, who, table, operation, reason) to
// the audit table beside the fence table (its name with "_bypass") and a
// NOTICE. WithBypassRole restricts that to a role's members.
//
// What it cannot stop: the table's owner or a superuser disabling the
// trigger (ALTER TABLE … DISABLE TRIGGER) or skipping triggers
// (session_replication_role = replica), writes through another database
// or a restored backup, and a writer that sets redfence.fence itself to
// claim a token it does not hold.
//
// Protect is idempotent (it replaces the trigger, with a new expression)
// and safe to run from several processes at once; it needs the fence
// table (Migrate). Errors are as for Migrate; a bad table name or an
// empty resource is ErrInvalid, and an expression PostgreSQL cannot
// evaluate over the table's rows is refused before anything changes.
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
	if strings.TrimSpace(resource) == "" || strings.ContainsRune(resource, 0) {
		return invalid("empty resource expression")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fenced: protect: %w", err)
	}
	n := g.names(table)
	bypass := `coalesce(current_setting('` + settingBypass + `', true), '') <> ''`
	if cfg.bypassRole != "" {
		bypass += ` AND pg_has_role(current_user, ` + quoteLiteral(cfg.bypassRole) + `, 'MEMBER')`
	}
	// The row function is per table: it holds the resource expression as
	// static SQL, planned once per session.
	rowFn := `CREATE OR REPLACE FUNCTION ` + n.rowFn + `() RETURNS trigger LANGUAGE plpgsql AS $redfence$
DECLARE
	_rf_old text;
	_rf_new text;
BEGIN
	IF ` + bypass + ` THEN
		RETURN coalesce(NEW, OLD);
	END IF;
	IF TG_OP <> 'INSERT' THEN
		SELECT (` + resource + `) INTO _rf_old FROM (SELECT OLD.*) AS _rf_row;
		PERFORM ` + n.check + `(_rf_old, TG_TABLE_SCHEMA, TG_TABLE_NAME);
	END IF;
	IF TG_OP = 'DELETE' THEN
		RETURN OLD;
	END IF;
	SELECT (` + resource + `) INTO _rf_new FROM (SELECT NEW.*) AS _rf_row;
	IF TG_OP = 'INSERT' OR _rf_new IS DISTINCT FROM _rf_old THEN
		PERFORM ` + n.check + `(_rf_new, TG_TABLE_SCHEMA, TG_TABLE_NAME);
	END IF;
	RETURN NEW;
END
$redfence$`
	stmtFn := `CREATE OR REPLACE FUNCTION ` + n.stmtFn + `() RETURNS trigger LANGUAGE plpgsql AS $redfence$
BEGIN
	IF ` + bypass + ` THEN
		PERFORM ` + n.record + `(current_user, TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME, TG_OP, current_setting('` + settingBypass + `'));
		RAISE NOTICE 'redfence: % on %.% without a fencing token (bypass: %)', TG_OP, TG_TABLE_SCHEMA, TG_TABLE_NAME, current_setting('` + settingBypass + `');
	ELSIF TG_OP = 'TRUNCATE' THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
			MESSAGE = format('redfence: TRUNCATE of protected table %I.%I needs the bypass (SET LOCAL ` + settingBypass + ` = ''reason'')', TG_TABLE_SCHEMA, TG_TABLE_NAME),
			DETAIL = json_build_object('table', TG_TABLE_SCHEMA || '.' || TG_TABLE_NAME)::text;
	END IF;
	RETURN NULL;
END
$redfence$`
	err = pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('redfence.fenced.protect'))`); err != nil {
			return err
		}
		// The expression must evaluate over the table's rows: a typo
		// fails here, not in the first write.
		if _, err := tx.Exec(ctx, `SELECT (`+resource+`)::text FROM (SELECT * FROM `+qt+` LIMIT 0) AS _rf_row`); err != nil {
			return fmt.Errorf("resource expression %q over %s: %w", clip(resource), qt, err)
		}
		for _, q := range []string{
			`CREATE TABLE IF NOT EXISTS ` + n.audit + ` (
	at                timestamptz NOT NULL DEFAULT now(),
	txid              bigint      NOT NULL,
	username          text        NOT NULL,
	session_user_name text        NOT NULL,
	table_name        text        NOT NULL,
	operation         text        NOT NULL,
	reason            text        NOT NULL
)`,
			// The audit and the check run with the rights of who ran
			// Protect (SECURITY DEFINER, on the search path Protect ran
			// with): a writer needs no rights on the fence or audit
			// table to be refused or audited.
			`CREATE OR REPLACE FUNCTION ` + n.record + `(_user text, _table text, _op text, _reason text) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path FROM CURRENT AS $redfence$
	INSERT INTO ` + n.audit + ` (txid, username, session_user_name, table_name, operation, reason)
	VALUES (txid_current(), _user, session_user, _table, _op, _reason)
$redfence$`,
			// The Guard's upsert holds the fence row's lock until commit
			// when it recorded the token.
			`CREATE OR REPLACE FUNCTION ` + n.check + `(_res text, _schema text, _table text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $redfence$
DECLARE
	_tok bigint;
	_high bigint;
BEGIN
	IF _res IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
			MESSAGE = format('redfence: a row of protected table %I.%I has a NULL resource', _schema, _table),
			DETAIL = json_build_object('table', _schema || '.' || _table)::text;
	END IF;
	_tok := (nullif(current_setting('` + settingFence + `', true), '')::jsonb ->> _res)::bigint;
	IF _tok IS NULL THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeNoToken + `',
			MESSAGE = format('redfence: no fencing token for resource %s in this transaction, writing protected table %I.%I', left(_res, 64), _schema, _table),
			DETAIL = json_build_object('resource', _res, 'table', _schema || '.' || _table)::text,
			HINT = 'write through fenced.Guard.Do or Check with the lock''s token';
	END IF;
	SELECT token INTO _high FROM ` + g.table + ` WHERE resource = _res;
	IF _high > _tok THEN
		RAISE EXCEPTION USING ERRCODE = '` + CodeStaleToken + `',
			MESSAGE = format('redfence: stale token %s for resource %s: %s was already accepted', _tok, left(_res, 64), _high),
			DETAIL = json_build_object('resource', _res, 'table', _schema || '.' || _table, 'token', _tok, 'highest', _high)::text;
	END IF;
END
$redfence$`,
			rowFn,
			stmtFn,
			`DROP TRIGGER IF EXISTS redfence_fence ON ` + qt,
			`DROP TRIGGER IF EXISTS redfence_fence_statement ON ` + qt,
			`CREATE TRIGGER redfence_fence BEFORE INSERT OR UPDATE OR DELETE ON ` + qt + ` FOR EACH ROW EXECUTE FUNCTION ` + n.rowFn + `()`,
			`CREATE TRIGGER redfence_fence_statement BEFORE INSERT OR UPDATE OR DELETE OR TRUNCATE ON ` + qt + ` FOR EACH STATEMENT EXECUTE FUNCTION ` + n.stmtFn + `()`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("fenced: protect %s: %w", clip(table), err)
	}
	return nil
}

// Unprotect removes Protect's triggers and function from table; the
// shared check function and the audit table stay (other tables may use
// them). It is idempotent.
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
	n := g.names(table)
	err = pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('redfence.fenced.protect'))`); err != nil {
			return err
		}
		for _, q := range []string{
			`DROP TRIGGER IF EXISTS redfence_fence ON ` + qt,
			`DROP TRIGGER IF EXISTS redfence_fence_statement ON ` + qt,
			`DROP FUNCTION IF EXISTS ` + n.rowFn + `()`,
			`DROP FUNCTION IF EXISTS ` + n.stmtFn + `()`,
		} {
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

// protectNames are the quoted names Protect creates.
type protectNames struct {
	check  string // shared: checks one resource against this Guard's fence table
	audit  string // shared: the bypass audit table
	record string // shared: adds a row to it
	rowFn  string // per protected table
	stmtFn string // per protected table: TRUNCATE and the bypass's audit
}

func (g *Guard) names(table string) protectNames {
	return protectNames{
		check:  sibling(g.name, "_check"),
		audit:  sibling(g.name, "_bypass"),
		record: sibling(g.name, "_bypass_record"),
		rowFn:  sibling(table, "_redfence_row"),
		stmtFn: sibling(table, "_redfence_stmt"),
	}
}

// sibling names an object in name's schema after name's last part and
// suffix, quoted; a name too long for PostgreSQL's 63 bytes is shortened
// with a hash of the whole, so that two long names do not meet.
func sibling(name, suffix string) string {
	parts := strings.Split(name, ".")
	last := parts[len(parts)-1] + suffix
	if len(last) > 63 {
		sum := sha1.Sum([]byte(name))
		keep := parts[len(parts)-1]
		for len(keep) > 63-len(suffix)-9 {
			keep = keep[:len(keep)-1]
		}
		last = strings.ToValidUTF8(keep, "") + "_" + hex.EncodeToString(sum[:4]) + suffix
	}
	parts[len(parts)-1] = last
	return pgx.Identifier(parts).Sanitize()
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
