package fenced

import (
	"errors"

	"github.com/redfence/redfence/fenced/fence"
	invalidpkg "github.com/redfence/redfence/internal/invalid"
)

// The errors and limits every fence shares live in package fence; these
// are the same values, so errors.Is and errors.As match across stores.
var (
	// ErrStaleToken is matched (errors.Is) by the error Do and Check return
	// when the token is lower than the highest recorded for the resource.
	// The concrete error is a *StaleTokenError.
	ErrStaleToken = fence.ErrStaleToken
	// ErrInvalid is matched by errors for bad arguments or configuration,
	// returned by New or before any round trip to the database. It is
	// mutex.ErrInvalid (through internal/invalid: fenced does not import
	// the Locker).
	ErrInvalid = fence.ErrInvalid
	// ErrNotMigrated is matched by the error Do, Check, Raise and Fences
	// return when the fence table does not exist. The error also wraps PostgreSQL's
	// *pgconn.PgError (SQLSTATE 42P01).
	ErrNotMigrated = fence.ErrNotMigrated
	// ErrCheckNotFirst is matched by the error Check returns when its
	// transaction read a table before it, and Do over a pgx.Tx when the
	// enclosing transaction did: what was read may predate the previous
	// holder's write. Nothing was recorded; roll back.
	ErrCheckNotFirst = fence.ErrCheckNotFirst
	// ErrNoToken is matched by the error for a write to a protected table
	// whose transaction declared no token for the row's resource (see
	// Protect); Refusal maps PostgreSQL's error to it.
	ErrNoToken = errors.New("fenced: no fencing token for the resource in this transaction")
)

// StaleTokenError says which write was refused and why: Token is lower than
// Highest, the highest token recorded for Resource when the write was checked.
// Its message quotes at most the first 64 bytes of Resource.
type StaleTokenError = fence.StaleTokenError

// MaxResourceLen is the longest resource, in bytes, that Do, Check and
// Raise accept. It keeps the fence table's primary-key entries well under
// PostgreSQL's B-tree row limit (about 2.7 KB).
const MaxResourceLen = fence.MaxResourceLen

func invalid(format string, args ...any) error {
	return invalidpkg.Errorf("fenced", format, args...)
}

// clip shortens s for an error message (fence.Clip).
func clip(s string) string { return fence.Clip(s) }
