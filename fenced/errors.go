package fenced

import (
	"errors"
	"fmt"
)

var (
	// ErrStaleToken is matched (errors.Is) by the error Do and Check return
	// when the token is lower than the highest recorded for the resource.
	// The concrete error is a *StaleTokenError.
	ErrStaleToken = errors.New("fenced: stale token")
	// ErrInvalid is matched by errors for bad arguments or configuration,
	// returned before any round trip to the database.
	ErrInvalid = errors.New("fenced: invalid argument")
)

// StaleTokenError says which write was refused and why: Token is lower than
// Highest, the highest token recorded for Resource when the write was checked.
type StaleTokenError struct {
	Resource string
	Token    int64
	Highest  int64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fenced: stale token %d for resource %q: %d was already accepted", e.Token, e.Resource, e.Highest)
}

// Is reports whether target is ErrStaleToken.
func (e *StaleTokenError) Is(target error) bool { return target == ErrStaleToken }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
