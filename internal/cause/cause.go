// Package cause adds why a context ended to the error it ended: an error
// that says "context canceled" when the context was cancelled because a lock
// was lost hides what the caller needs to know.
package cause

import (
	"context"
	"errors"
)

// Wrap returns err joined with context.Cause(ctx) when ctx has ended with a
// cause that err does not already carry (a lost lock, a shutdown, a timeout
// given its own cause): errors.Is matches both err, and whatever err wraps
// (the server's error), and the cause, and the message says both. It returns
// err unchanged when err is nil, ctx is nil or has not ended, or the cause
// is already in err (a plain cancellation or deadline, whose cause is
// ctx.Err()).
func Wrap(ctx context.Context, err error) error {
	if err == nil || ctx == nil || ctx.Err() == nil {
		return err
	}
	c := context.Cause(ctx)
	if c == nil || errors.Is(err, c) {
		return err
	}
	return &causeError{err: err, cause: c}
}

type causeError struct{ err, cause error }

func (e *causeError) Error() string   { return e.err.Error() + " (cause: " + e.cause.Error() + ")" }
func (e *causeError) Unwrap() []error { return []error{e.err, e.cause} }
