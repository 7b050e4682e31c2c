package sqlfence

import (
	"errors"

	"github.com/redfence/redfence/fenced/fence"
	invalidpkg "github.com/redfence/redfence/internal/invalid"
)

// The errors and limits every fence shares live in package fence; these
// are the same values (fenced's too), so errors.Is and errors.As match
// whichever store refused a write.
var (
	// ErrStaleToken is matched (errors.Is) by the error Do and Check return
	// when the token is lower than the highest recorded for the resource.
	// The concrete error is a *StaleTokenError.
	ErrStaleToken = fence.ErrStaleToken
	// ErrInvalid is matched by errors for bad arguments or configuration,
	// returned by New or before any round trip to the database. It is
	// mutex.ErrInvalid.
	ErrInvalid = fence.ErrInvalid
	// ErrNotMigrated is matched by the error Do and Check return when the
	// fence table does not exist; it also wraps the driver's error (see the
	// package doc).
	ErrNotMigrated = fence.ErrNotMigrated
	// ErrCheckNotFirst is matched by the error Check returns when its
	// transaction read before it and what it read may be stale (see Check
	// for each dialect). Nothing was recorded; roll back.
	ErrCheckNotFirst = fence.ErrCheckNotFirst
	// ErrUnsafeStorage is matched by the error Migrate returns when the
	// fence table is stored where it cannot fence writers (MySQL: an engine
	// other than InnoDB; SQLite: an in-memory database), and by the error
	// Do and Check return on MySQL when the table was altered to another
	// engine after Migrate. Nothing was written.
	ErrUnsafeStorage = errors.New("sqlfence: the fence table's storage cannot fence writers")
)

// StaleTokenError says which write was refused and why: Token is lower than
// Highest, the highest token recorded for Resource when the write was checked.
// Its message quotes at most the first 64 bytes of Resource.
type StaleTokenError = fence.StaleTokenError

// MaxResourceLen is the longest resource, in bytes, that Do and Check
// accept; it fits every dialect's primary key (MySQL's is a
// VARBINARY(1024)).
const MaxResourceLen = fence.MaxResourceLen

func invalid(format string, args ...any) error {
	return invalidpkg.Errorf("sqlfence", format, args...)
}
