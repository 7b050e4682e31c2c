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
	// ErrUnavailable is matched by an acquisition's error when the servers
	// gave no answer (refused, failed or did not reply in time) rather than
	// a busy lock: the server's error is wrapped. It tells an outage from
	// contention. It is backend.ErrUnavailable.
	ErrUnavailable = backend.ErrUnavailable
	// ErrNotHeld: Unlock, Extend or TTL by a caller that no longer holds the
	// lock (released, lease run out, or taken by another). Nothing was changed.
	ErrNotHeld = errors.New("mutex: not held")
	// ErrLockLost is the cause of a Lock's context when renewal proved the lock
	// gone or its local lease deadline passed without a successful renewal.
	ErrLockLost = errors.New("mutex: lock lost")
	// ErrReleased is the cause of a Lock's context after its last Unlock.
	ErrReleased = errors.New("mutex: released")
	// ErrClosed is returned by a Locker after Close.
	ErrClosed = errors.New("mutex: locker closed")
	// ErrInvalid is matched (errors.Is) by every bad-input error; the error
	// itself says what is wrong. Bad input never reaches a server. It is
	// backend.ErrInvalid, which drivers use.
	ErrInvalid = backend.ErrInvalid
	// ErrPartial is matched by ListAll's error when a quorum of Redlock
	// nodes answered but not every node: the locks it returns are those the
	// others showed, and one held on a skipped node may be missing or free.
	ErrPartial = backend.ErrPartial
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
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

// QuorumError says why a Redlock attempt did not win its quorum, node by
// node (backend.QuorumError, which the Redlock driver returns). It matches
// ErrNotAcquired when owners holding the lock on some nodes stood in the
// way, and ErrUnavailable when nodes that failed or did not answer did; it
// unwraps to the nodes' errors.
type QuorumError = backend.QuorumError
