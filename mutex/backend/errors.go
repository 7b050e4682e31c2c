package backend

import (
	"errors"

	"github.com/redfence/redfence/internal/invalid"
)

// Outcomes a Backend may return, which package mutex exports under the same
// names (mutex.ErrNotAcquired is ErrNotAcquired): a driver tells contention
// from an outage without importing the Locker. A driver's error may carry
// data of its own (redlockdriver.QuorumError); one with an ErrorType()
// string method names its class for telemetry's error.type.
var (
	// ErrNotAcquired: another owner holds the key.
	ErrNotAcquired = errors.New("mutex: not acquired")
	// ErrUnavailable: the servers gave no answer (refused, failed or did
	// not reply in time), rather than a busy key.
	ErrUnavailable = errors.New("mutex: store unavailable")
	// ErrInvalid: bad input, refused before any server is asked. It is
	// redfence's one bad-input sentinel (mutex.ErrInvalid,
	// fenced.ErrInvalid, ... are this value).
	ErrInvalid = invalid.Err
	// ErrPartial: a listing that a quorum of nodes answered, but not every
	// node.
	ErrPartial = errors.New("mutex: partial listing")
	// ErrGivenBack, matched by an Acquire's error, says the backend freed
	// what the attempt took itself (after its calls ended): the Locker
	// sends no Abandon for it.
	ErrGivenBack = errors.New("backend: the attempt's grants were given back")
)

// GivenBack marks err, an Acquire's error, as matching ErrGivenBack, and
// keeps its text and the rest of its chain (errors.As still finds a
// driver's own error type in it).
func GivenBack(err error) error {
	if err == nil {
		return nil
	}
	return &givenBack{err}
}

type givenBack struct{ err error }

func (e *givenBack) Error() string   { return e.err.Error() }
func (e *givenBack) Unwrap() []error { return []error{e.err, ErrGivenBack} }
