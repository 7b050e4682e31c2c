package mutex

import (
	"errors"
	"fmt"
)

var (
	// ErrNotAcquired: TryLock found the lock held by another owner, or Lock
	// gave up (then joined with ctx.Err()).
	ErrNotAcquired = errors.New("mutex: not acquired")
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
	// itself says what is wrong. Bad input never reaches Redis.
	ErrInvalid = errors.New("mutex: invalid argument")
)

// errNoMajority: a Redlock call where too few nodes answered to tell.
var errNoMajority = errors.New("mutex: Redlock: no majority of nodes answered")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
