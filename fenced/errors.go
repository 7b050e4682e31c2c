package fenced

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

var (
	// ErrStaleToken is matched (errors.Is) by the error Do and Check return
	// when the token is lower than the highest recorded for the resource.
	// The concrete error is a *StaleTokenError.
	ErrStaleToken = errors.New("fenced: stale token")
	// ErrInvalid is matched by errors for bad arguments or configuration,
	// returned before any round trip to the database.
	ErrInvalid = errors.New("fenced: invalid argument")
	// ErrNotMigrated is matched by the error Do, Check, Raise and Fences
	// return when the fence table does not exist. The error also wraps PostgreSQL's
	// *pgconn.PgError (SQLSTATE 42P01).
	ErrNotMigrated = errors.New("fenced: fence table does not exist (call Guard.Migrate first)")
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
	return fmt.Sprintf("fenced: stale token %d for resource %q: %d was already accepted", e.Token, clip(e.Resource), e.Highest)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}

// clip shortens s for an error message, so that a long argument is not
// echoed whole. It cuts at a rune boundary.
func clip(s string) string {
	n := 64
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
