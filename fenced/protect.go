package fenced

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// settingBypass, set to a reason, lets an operator write a protected table
// without a token, on the record.
const settingBypass = "redfence.bypass"

// DefaultLockTimeout is how long Protect and Unprotect wait for their lock
// on the table unless WithLockTimeout says otherwise.
const DefaultLockTimeout = 2 * time.Second

// ProtectOption configures Protect and Unprotect. Nil options are ignored.
type ProtectOption interface{ applyProtect(*protectConfig) }

type protectConfig struct {
	bypassRole  string
	lockTimeout time.Duration
	err         error
}

type protectOptionFunc func(*protectConfig)

func (f protectOptionFunc) applyProtect(c *protectConfig) { f(c) }

// WithBypassRole restricts the bypass (see Protect) to sessions whose user
// is a member of role: session_user, the role the session logged in as,
// not one it switched to with SET ROLE nor the owner of a SECURITY DEFINER
// function it called. Default: any session that names a reason may
// bypass. Unprotect ignores it.
func WithBypassRole(role string) ProtectOption {
	return protectOptionFunc(func(c *protectConfig) { c.bypassRole = role })
}

// WithLockTimeout bounds how long Protect and Unprotect wait for their lock
// on the table (PostgreSQL's lock_timeout); a ctx deadline that comes
// sooner bounds it instead. Default: DefaultLockTimeout. A d of zero or
// less is ErrInvalid.
func WithLockTimeout(d time.Duration) ProtectOption {
	return protectOptionFunc(func(c *protectConfig) {
		if d <= 0 {
			c.err = invalid("lock timeout %v: must be positive", d)
		}
		c.lockTimeout = d
	})
}

// Protect makes table refuse every write that did not go through the
// Guard: triggers check the rows each INSERT, UPDATE, DELETE, MERGE,
// INSERT … ON CONFLICT or COPY changed (an UPDATE both the old rows'
// resources and the new ones') against the tokens this transaction
// declared to this Guard's fence table through Do or Check, and fail the
// statement when a row's resource has none (SQLSTATE RF002, ErrNoToken) or
// a token lower than the highest recorded (RF001, ErrStaleToken); TRUNCATE,
// which names no rows, is refused. The check runs once per statement,
// after it (AFTER … FOR EACH STATEMENT, over its transition tables), so it
// sees the rows as stored, generated columns filled and other BEFORE
// triggers done, and it reads the declarations once however many rows and
// resources the statement has.
//
// resource is a SQL expression over the row's columns that gives the
// resource its writes are fenced under, as passed to Do: for example
// `'account:' || id`. It is the developer's SQL, not input. It runs with
// the rights of the role that ran Protect, on the search path pg_catalog
// alone, so that nothing another user creates in a schema changes what it
// calls: it may name the table's columns (a column named like a PL/pgSQL
// trigger variable, tg_op, is the column), built-in functions, operators
// and types, and schema-qualified objects that only roles you trust with
// that role's rights can create or change. Protect refuses, with
// ErrInvalid and before anything changes, an expression PostgreSQL cannot
// evaluate that way over the table's rows, one that names anything else,
// and an aggregate, window or set-returning function. Keep it independent of session settings (a timestamptz cast to
// text depends on TimeZone). Re-run Protect after altering the columns it
// reads.
//
// A partitioned table is protected with its partitions, at every level: a
// write to a partition is checked as one to the table. A partition added
// later is checked row by row, by a row trigger every partition inherits,
// until Protect runs again and gives it its own statement triggers (and
// its TRUNCATE guard). A table with inheritance children is refused
// (ErrInvalid): protect each table instead.
//
// An operator can bypass it, on purpose and on the record: a transaction
// that sets redfence.bypass to a reason (SET LOCAL redfence.bypass =
// 'backfill, ticket 42') writes without a token, and each such statement
// adds a row per operation (when, the session's user, table, operation,
// reason) to the audit table beside the fence table (its name with
// "_bypass") and sends a NOTICE (on a partition added since Protect, a row
// and a NOTICE per row). WithBypassRole restricts that to a role's
// members. Rows reach the audit table through the trigger, which runs as
// the role that ran Protect; Protect refuses (ErrInvalid) an audit table
// created beforehand by a role other than itself, the fence table's owner
// or a superuser, since its owner could delete rows; who else may change
// it is its owner's grants. The trigger's function may be used in a
// trigger by the role that ran Protect, by the table's owner (to add
// partitions, which copy the row trigger) and by superusers; nobody
// calls it directly. Use SET LOCAL: a
// session-wide SET, an ALTER ROLE … SET or a pooled connection that keeps
// it would let later writers through under that reason.
//
// What it guards against is accidents and other services, not a hostile
// user with SQL access to the table. It cannot stop: the table's owner or
// a superuser disabling the triggers (ALTER TABLE … DISABLE TRIGGER) or
// skipping them (session_replication_role = replica); a writer that
// declares tokens itself (one set_config, whose name it can read from the
// function), claiming a token it does not hold; writes through another
// database or a restored backup; rows a table held before it was attached
// as a partition; writes made straight to an inheritance child created
// after Protect (through the parent, its rows are checked); and ALTER
// TABLE … ALTER COLUMN … TYPE … USING, which rewrites rows without firing
// a trigger. The defence against a hostile user is WithBypassRole and
// revoking their direct rights on the table.
//
// Protect is idempotent (it replaces its triggers, with a new expression)
// and safe to run from several processes at once; it needs the fence
// table (Migrate). It takes one lock on table, and its partitions, before
// it changes anything, and holds it while it runs: SHARE ROW EXCLUSIVE
// (writers wait, readers go on), or ACCESS EXCLUSIVE (readers wait too)
// when it removes the triggers of an earlier version (the first Protect
// after an upgrade), as DROP TRIGGER needs. It waits for that lock once,
// no longer than its lock timeout (WithLockTimeout, DefaultLockTimeout, or
// ctx's deadline if that comes first): those it blocks queue behind it at
// most that long, and then as long as it runs.
// When the timeout passes it changes nothing and returns PostgreSQL's
// error, SQLSTATE 55P03 (lock_not_available); try again later. Two Guards
// with different fence tables can both protect a table: each has its own
// triggers, and a writer needs a token in each. It removes the triggers
// and functions an earlier version of this package made for this Guard's
// fence on table. The role that runs it needs to read the fence table and
// add to the audit table, and to own table (and its partitions) when it
// is partitioned. Errors are as for Migrate; a bad table name, an empty or
// unusable resource expression and a bad role or option are ErrInvalid.
// Protect and Unprotect need PostgreSQL 14 or later.
func (g *Guard) Protect(ctx context.Context, table, resource string, opts ...ProtectOption) error {
	if err := g.usable(ctx); err != nil {
		return err
	}
	cfg, qt, err := protectArgs(table, opts)
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
	// Only the triggers an earlier version made are dropped.
	drops := func(n protectNames) bool { return len(n.legacy) > 0 }
	err = g.underLock(ctx, qt, cfg, drops, func(tx pgx.Tx, n protectNames) error {
		if err := n.protectable(); err != nil {
			return err
		}
		if err := validate(ctx, tx, n, resource, cfg); err != nil {
			return err
		}
		if err := auditOwner(ctx, tx, n); err != nil {
			return err
		}
		if err := dropLegacy(ctx, tx, n); err != nil {
			return err
		}
		if err := execAll(ctx, tx, protectSQL(n, resource, cfg)); err != nil {
			return err
		}
		return triggerRights(ctx, tx, n)
	})
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotMigrated) {
			return err
		}
		return fmt.Errorf("fenced: protect %s: %w", clip(table), err)
	}
	return nil
}

// Unprotect removes this Guard's triggers and their function from table
// (and its partitions), those an earlier version of this package made
// included; the audit table stays, for other tables and for the record. It
// is idempotent; a table that no longer exists is fine. It needs the fence
// table, to know which triggers are this Guard's (ErrNotMigrated without
// it). It takes ACCESS EXCLUSIVE on table and its partitions (DROP
// TRIGGER's: readers wait too), up front and once, waiting for it as
// Protect does (WithLockTimeout).
func (g *Guard) Unprotect(ctx context.Context, table string, opts ...ProtectOption) error {
	if err := g.usable(ctx); err != nil {
		return err
	}
	cfg, qt, err := protectArgs(table, opts)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fenced: unprotect: %w", err)
	}
	always := func(protectNames) bool { return true }
	err = g.underLock(ctx, qt, cfg, always, func(tx pgx.Tx, n protectNames) error {
		if err := dropLegacy(ctx, tx, n); err != nil {
			return err
		}
		return execAll(ctx, tx, unprotectSQL(n))
	})
	var missing *missingTable
	if errors.As(err, &missing) {
		return nil
	}
	if err != nil {
		if errors.Is(err, ErrInvalid) || errors.Is(err, ErrNotMigrated) {
			return err
		}
		return fmt.Errorf("fenced: unprotect %s: %w", clip(table), err)
	}
	return nil
}

// protectArgs applies opts and quotes table, reporting either's fault.
func protectArgs(table string, opts []ProtectOption) (protectConfig, string, error) {
	cfg := protectConfig{lockTimeout: DefaultLockTimeout}
	for _, o := range opts {
		if o != nil {
			o.applyProtect(&cfg)
		}
	}
	if cfg.err != nil {
		return cfg, "", cfg.err
	}
	qt, err := quoteTable(table)
	return cfg, qt, err
}

// The table locks Protect and Unprotect take: CREATE TRIGGER's, which
// lets readers on, and DROP TRIGGER's, which does not.
const (
	lockCreate = "SHARE ROW EXCLUSIVE"
	lockDrop   = "ACCESS EXCLUSIVE"
)

// underLock runs fn in a transaction that holds Protect's advisory lock
// (Protects and Unprotects of one database take turns) and then table's
// lock, waiting for the latter once, no longer than the lock timeout: the
// lock is lockDrop when drops says fn will drop a trigger (every later
// statement needs no stronger one), lockCreate otherwise. Names are
// resolved on the caller's search path; fn runs on pg_catalog's alone.
func (g *Guard) underLock(ctx context.Context, table string, cfg protectConfig, drops func(protectNames) bool, fn func(pgx.Tx, protectNames) error) error {
	return pgx.BeginFunc(ctx, g.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('redfence.fenced.protect'))`); err != nil {
			return err
		}
		n, err := g.resolve(ctx, tx, table)
		if err != nil {
			return err
		}
		if err := findLegacy(ctx, tx, &n); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `SELECT set_config('lock_timeout', $1, true), set_config('search_path', 'pg_catalog, pg_temp', true)`,
			lockTimeout(ctx, cfg.lockTimeout))
		if err != nil {
			return err
		}
		mode := lockCreate
		if drops(n) {
			mode = lockDrop
		}
		// The lock first, so that nothing changes when it cannot be had;
		// on a partitioned table it takes the partitions' too.
		if _, err := tx.Exec(ctx, `LOCK TABLE `+n.table+` IN `+mode+` MODE`); err != nil {
			return err
		}
		if err := n.readTree(ctx, tx); err != nil {
			return err
		}
		return fn(tx, n)
	})
}

// lockTimeout is lock_timeout's value: d, or what is left of ctx if less.
func lockTimeout(ctx context.Context, d time.Duration) string {
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl))
	}
	return strconv.FormatInt(max(d.Milliseconds(), 1), 10) + "ms"
}

func execAll(ctx context.Context, tx pgx.Tx, qs []string) error {
	for _, q := range qs {
		if _, err := tx.Exec(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

// validate refuses, before anything changes, a bypass role that does not
// exist and a resource expression that cannot be evaluated over table's
// rows as the trigger will: on pg_catalog's search path, over the columns
// alone, one value per row. It is sent on the extended protocol, which
// takes one statement only.
func validate(ctx context.Context, tx pgx.Tx, n protectNames, resource string, cfg protectConfig) error {
	if cfg.bypassRole != "" {
		if _, err := tx.Exec(ctx, `SELECT $1::text::regrole`, cfg.bypassRole); err != nil {
			return fmt.Errorf("%w: bypass role %q: %w", ErrInvalid, clip(cfg.bypassRole), err)
		}
	}
	// In WHERE, PostgreSQL refuses aggregates, window and set-returning
	// functions, which would not give one resource per row.
	q := `SELECT 1 FROM (SELECT * FROM ` + n.table + ` LIMIT 0) AS _rf_row WHERE (` + resource + `)::text IS NOT NULL`
	if _, err := tx.Conn().PgConn().ExecParams(ctx, q, nil, nil, nil, nil).Close(); err != nil {
		return fmt.Errorf("%w: resource expression %q over %s: %w", ErrInvalid, clip(resource), n.table, err)
	}
	return nil
}

// auditOwner refuses, before anything changes, an audit table that exists
// already and is owned by a role other than the one running Protect, the
// fence table's owner or a superuser: its owner could delete the record.
func auditOwner(ctx context.Context, tx pgx.Tx, n protectNames) error {
	var owner string
	var trusted bool
	err := tx.QueryRow(ctx, `SELECT quote_ident(r.rolname), r.rolname IN (current_user, pg_get_userbyid(f.relowner)) OR r.rolsuper
FROM pg_class c JOIN pg_roles r ON r.oid = c.relowner, pg_class f
WHERE c.oid = to_regclass($1) AND f.oid = to_regclass($2)`, n.audit, n.fence).Scan(&owner, &trusted)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // Protect creates it
		return nil
	case err != nil:
		return err
	case !trusted:
		return fmt.Errorf("%w: audit table %s is owned by %s, who could delete its rows: not by the role running Protect (%s), the fence table's owner (%s) or a superuser",
			ErrInvalid, n.audit, owner, n.me, n.fenceOwner)
	}
	return nil
}

// triggerRights refuses a trigger that would fail every write for want of
// its owner's rights on the fence and the audit tables.
func triggerRights(ctx context.Context, tx pgx.Tx, n protectNames) error {
	var ok bool
	err := tx.QueryRow(ctx, `SELECT has_table_privilege($1, 'SELECT') AND has_table_privilege($2, 'INSERT')`, n.fence, n.audit).Scan(&ok)
	if err == nil && !ok {
		err = fmt.Errorf("%w: the role running Protect (%s) cannot read %s or insert into %s, which the trigger does with its rights", ErrInvalid, n.me, n.fence, n.audit)
	}
	return err
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
