package mutex

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

var (
	// ErrNotAcquired: TryLock found the lock held by another owner, or Lock
	// gave up (then joined with ctx.Err()).
	ErrNotAcquired = errors.New("mutex: not acquired")
	// ErrUnavailable is matched by an acquisition's error when Redis gave no
	// answer (refused, failed or did not reply in time) rather than a busy
	// lock: the server's error is wrapped. It tells an outage from contention.
	ErrUnavailable = errors.New("mutex: Redis unavailable")
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
	// ErrPartial is matched by ListAll's error when a quorum of Redlock
	// nodes answered but not every node: the locks it returns are those the
	// others showed, and one held on a skipped node may be missing or free.
	ErrPartial = errors.New("mutex: partial listing")
)

// errNoMajority: a Redlock call that no majority of nodes confirmed.
var errNoMajority = errors.New("mutex: Redlock: no majority of nodes confirmed")

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
// node. It matches ErrNotAcquired when owners holding the lock on some nodes
// stood in the way, and ErrUnavailable when nodes that failed or did not
// answer did (too few answered to call it contention); it unwraps to the
// nodes' errors.
type QuorumError struct {
	Quorum int      // grants needed
	Addrs  []string // by node, in NewRedlock's order; read-only
	// Nodes holds each node's answer: nil when it granted the lock,
	// ErrNotAcquired when another owner held it there, otherwise its error.
	Nodes []error
	// Late: a quorum granted the lock, but its validity (TTL − elapsed −
	// drift) ran out, or a majority did not confirm the token, first.
	Late bool
}

func (e *QuorumError) granted() (granted int) {
	for _, err := range e.Nodes {
		if err == nil {
			granted++
		}
	}
	return granted
}

// outage reports whether failing or unanswered nodes, not other holders,
// kept the quorum out of reach: the nodes that did not fail could not have
// made a quorum. Nodes whose reply was not awaited (the others had decided)
// did not fail.
func (e *QuorumError) outage() bool {
	failed := 0
	for _, err := range e.Nodes {
		if err != nil && err != ErrNotAcquired && err != errNotAwaited {
			failed++
		}
	}
	return e.Late || len(e.Nodes)-failed < e.Quorum
}

func (e *QuorumError) Error() string {
	granted := e.granted()
	var b strings.Builder
	b.WriteString("mutex: Redlock: ")
	b.WriteString(strconv.Itoa(granted))
	b.WriteString(" of ")
	b.WriteString(strconv.Itoa(len(e.Nodes)))
	b.WriteString(" nodes granted the lock, a quorum needs ")
	b.WriteString(strconv.Itoa(e.Quorum))
	if e.Late {
		b.WriteString(", and came too late: the lease's validity ran out first")
	}
	for i, err := range e.Nodes {
		b.WriteString("; node ")
		b.WriteString(strconv.Itoa(i))
		if i < len(e.Addrs) && e.Addrs[i] != "" {
			b.WriteString(" (" + e.Addrs[i] + ")")
		}
		switch {
		case err == nil:
			b.WriteString(": granted")
		case err == ErrNotAcquired:
			b.WriteString(": held by another owner")
		default:
			b.WriteString(": " + err.Error())
		}
	}
	return b.String()
}

// Is matches ErrNotAcquired for contention and ErrUnavailable for an outage.
func (e *QuorumError) Is(target error) bool {
	if e.outage() {
		return target == ErrUnavailable
	}
	return target == ErrNotAcquired
}

// Unwrap returns the errors of the nodes that failed.
func (e *QuorumError) Unwrap() []error {
	var errs []error
	for _, err := range e.Nodes {
		if err != nil && err != ErrNotAcquired {
			errs = append(errs, err)
		}
	}
	return errs
}
