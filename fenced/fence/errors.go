package fence

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/redfence/redfence/internal/invalid"
)

var (
	// ErrStaleToken is matched (errors.Is) by the error a guard's Do and
	// Check return when the token is lower than the highest recorded for
	// the resource. The concrete error is a *StaleTokenError.
	ErrStaleToken = errors.New("fenced: stale token")
	// ErrInvalid is matched by errors for bad arguments or configuration,
	// returned by New or before any round trip to the store. It is
	// redfence's one bad-input sentinel (mutex.ErrInvalid), so
	// errors.Is(err, mutex.ErrInvalid) holds without importing the Locker.
	ErrInvalid = invalid.Err
	// ErrNotMigrated is matched by the error a guard returns when its fence
	// table does not exist. The error also wraps the database's own error
	// (PostgreSQL: SQLSTATE 42P01; MySQL: 1146; SQLite: "no such table").
	ErrNotMigrated = errors.New("fenced: fence table does not exist (call Guard.Migrate first)")
	// ErrCheckNotFirst is matched by the error a guard's Check returns when
	// its transaction read before it: what it read may predate a write
	// committed by the resource's previous holder, and writing it back
	// would undo that write. Nothing was recorded; roll the transaction
	// back and begin again with Check first.
	ErrCheckNotFirst = errors.New("fenced: the transaction read before Check (call Check first)")
)

// StaleTokenError says which write was refused and why: Token is lower than
// Highest, the highest token recorded for Resource when the write was checked.
// Its message quotes at most the first 64 bytes of Resource.
type StaleTokenError struct {
	Resource string
	Token    int64
	Highest  int64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fenced: stale token %d for resource %q: %d was already accepted", e.Token, Clip(e.Resource), e.Highest)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

// Clip shortens s for an error message, so that a long argument is not
// echoed whole: at most its first 64 bytes, cut at a rune boundary, then
// "...". The guards quote resources, prefixes and names through it.
func Clip(s string) string {
	n := 64
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
