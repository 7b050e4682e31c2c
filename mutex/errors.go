package mutex

import (
	"errors"
	"fmt"

	"github.com/redfence/redfence/mutex/backend"
)

var (
	// ErrNotAcquired: TryLock found the lock held by another owner, or Lock
	// gave up (then joined with ctx.Err()). It is backend.ErrNotAcquired.
	ErrNotAcquired = backend.ErrNotAcquired
	// ErrUnavailable: the store gave no answer (refused, failed, silent),
	// an outage rather than a busy lock. It is backend.ErrUnavailable.
	ErrUnavailable = backend.ErrUnavailable
	// ErrNotHeld: Release, Extend or TTL by a caller that no longer holds
	// it (released, lease run out, or taken by another). Nothing changed.
	ErrNotHeld = errors.New("mutex: not held")
	// ErrLockLost is the cause of a Lock's context when renewal proved the lock
	// gone or its local lease deadline passed without a successful renewal.
	ErrLockLost = errors.New("mutex: lock lost")
	// ErrReleased is the cause of a Lock's context after its last Release.
	ErrReleased = errors.New("mutex: released")
	// ErrClosed is returned by a Locker after Close.
	ErrClosed = errors.New("mutex: locker closed")
	// ErrInvalid is matched by every bad-input error of every redfence
	// package, refused before any server is asked. It is backend.ErrInvalid.
	ErrInvalid = backend.ErrInvalid
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("mutex: %w: "+format, append([]any{ErrInvalid}, args...)...)
}

// unavailable marks err, an attempt's failure on the way to or on the
// server, as an outage (ErrUnavailable) while keeping it for errors.Is/As.
func unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return &unavailableError{err}
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string   { return ErrUnavailable.Error() + ": " + e.err.Error() }
func (e *unavailableError) Unwrap() []error { return []error{ErrUnavailable, e.err} }
