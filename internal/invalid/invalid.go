// Package invalid holds the one bad-input sentinel of redfence. Every
// package re-exports this value as its ErrInvalid (mutex.ErrInvalid,
// backend.ErrInvalid, fenced.ErrInvalid, ...), so that
// errors.Is(err, mutex.ErrInvalid) holds for bad input anywhere, while
// fenced and the drivers need not import the Locker.
package invalid

import (
	"errors"
	"fmt"
)

// Err is matched by every bad-input error of redfence.
var Err = errors.New("redfence: invalid argument")

// Errorf returns an error matching Err whose text is pkg, Err's words and
// the formatted detail: "mutex: invalid argument: empty key".
func Errorf(pkg, format string, args ...any) error {
	return &invalidError{pkg + ": invalid argument: " + fmt.Sprintf(format, args...)}
}

type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == Err }
