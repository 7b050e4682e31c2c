package redisfence

import (
	"errors"

	"github.com/redfence/redfence/fenced/fence"
	invalidpkg "github.com/redfence/redfence/internal/invalid"
)

// The sentinels every fenced store shares (package fence, which imports
// only the standard library: a program using only Redis compiles no pgx),
// so that errors.Is and errors.As find them whatever the store.
var (
	// ErrStaleToken is matched (errors.Is) by the error Do returns when the
	// token is lower than the highest recorded for the resource. The concrete
	// error is a *StaleTokenError.
	ErrStaleToken = fence.ErrStaleToken
	// ErrInvalid is matched by errors for bad arguments or configuration,
	// returned by New or before any round trip to Redis, and by the error
	// Do returns when fn executed the pipeline itself (nothing is written
	// then). It is mutex.ErrInvalid.
	ErrInvalid = fence.ErrInvalid
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
const MaxResourceLen = fence.MaxResourceLen

// StaleTokenError says which write was refused and why (fence's, shared
// by every store).
type StaleTokenError = fence.StaleTokenError

func invalid(format string, args ...any) error {
	return invalidpkg.Errorf("redisfence", format, args...)
}

func clip(s string) string { return fence.Clip(s) }
