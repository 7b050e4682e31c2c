package redisfence

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// The sentinels and StaleTokenError below mirror fenced's, which every
// fenced store shares. They are declared here, not imported, so that a
// program using only Redis does not compile pgx (issue 24).
var (
	// ErrStaleToken is matched (errors.Is) by the error Do returns when the
	// token is lower than the highest recorded for the resource. The concrete
	// error is a *StaleTokenError.
	ErrStaleToken = errors.New("redisfence: stale token")
	// ErrInvalid is matched by errors for bad arguments or configuration,
	// returned before any round trip to Redis, and by the error Do returns
	// when fn executed the pipeline itself (nothing is written then).
	ErrInvalid = errors.New("redisfence: invalid argument")
	// ErrContended is matched by the error Do returns when every attempt it
	// was allowed (WithAttempts) lost a WATCH race to another writer of the
	// resource's keys, or when ctx ended while it waited to try again. The
	// error also wraps redis.TxFailedErr or ctx.Err(). Nothing of that call
	// was written; the whole call can be retried with the same token.
	ErrContended = errors.New("redisfence: contended: every attempt lost a WATCH race")
)

// MaxResourceLen is the longest resource, in bytes, that Do accepts: the
// limit every fenced store applies, so a resource valid for one is valid
// for all.
const MaxResourceLen = 1024

// StaleTokenError says which write was refused and why: Token is lower than
// Highest, the highest token recorded for Resource when the write was
// checked. Its message quotes at most the first 64 bytes of Resource.
type StaleTokenError struct {
	Resource string
	Token    int64
	Highest  int64
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("redisfence: stale token %d for resource %q: %d was already accepted", e.Token, clip(e.Resource), e.Highest)
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
