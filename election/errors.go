package election

import (
	"errors"
	"fmt"

	"github.com/redfence/redfence/mutex"
)

// Errors. A caller gets:
//
//	bad input (New, Campaign, Run, Release)  ErrInvalid (it is mutex.ErrInvalid)
//	Leader when nobody leads                 ErrNoLeader
//	Campaign when ctx ended                  ctx.Err(), joined with mutex.ErrNotAcquired
//	Campaign on a closed Locker              mutex.ErrClosed
//	Leader/Observe without inspection        an error matching errors.ErrUnsupported
//	Leader with the store down               an error matching mutex.ErrUnavailable
//	context.Cause(t.Context()) after:
//	  Term.Release                           ErrResigned
//	  a lost lock                            ErrLost and mutex.ErrLockLost
//	  no renewal within the renew deadline   ErrLost
//	  Run's ctx ended                        ErrStopped, and that ctx's cause
var (
	// ErrInvalid is matched by every bad-input error; the error says what
	// is wrong. It is mutex.ErrInvalid.
	ErrInvalid = mutex.ErrInvalid
	// ErrNoLeader: Leader found nobody leading the election (no term begun,
	// the last one resigned or lost, or its leader still in lock-delay).
	ErrNoLeader = errors.New("election: no leader")
	// ErrResigned is the cause of a term's context after Term.Release.
	ErrResigned = errors.New("election: resigned")
	// ErrLost is matched by the cause of a term's context when leadership
	// was lost: the lock lost (also mutex.ErrLockLost) or not renewed
	// within the renew deadline.
	ErrLost = errors.New("election: leadership lost")
	// ErrStopped is matched by the cause of a term's context when Run's
	// context ended (the cause also matches that context's cause).
	ErrStopped = errors.New("election: Run stopped")
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: election: "+format, append([]any{ErrInvalid}, args...)...)
}

// lostError is a term's cause when its lock was lost: ErrLost and the
// lock's own cause.
type lostError struct{ cause error }

func (e *lostError) Error() string   { return ErrLost.Error() + ": " + e.cause.Error() }
func (e *lostError) Unwrap() []error { return []error{ErrLost, e.cause} }

// stoppedError is a term's cause when Run's context ended.
type stoppedError struct{ cause error }

func (e *stoppedError) Error() string   { return ErrStopped.Error() + ": " + e.cause.Error() }
func (e *stoppedError) Unwrap() []error { return []error{ErrStopped, e.cause} }
