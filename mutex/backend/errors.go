package backend

import (
	"errors"
	"strconv"
	"strings"
)

// Outcomes a Backend may return, which package mutex exports under the same
// names (mutex.ErrNotAcquired is ErrNotAcquired): a driver tells contention
// from an outage without importing the Locker.
var (
	// ErrNotAcquired: another owner holds the key.
	ErrNotAcquired = errors.New("mutex: not acquired")
	// ErrUnavailable: the servers gave no answer (refused, failed or did
	// not reply in time), rather than a busy key.
	ErrUnavailable = errors.New("mutex: Redis unavailable")
	// ErrInvalid: bad input, refused before any server is asked.
	ErrInvalid = errors.New("mutex: invalid argument")
	// ErrPartial: a listing that a quorum of nodes answered, but not every
	// node.
	ErrPartial = errors.New("mutex: partial listing")
	// ErrGivenBack, matched by an Acquire's error, says the backend freed
	// what the attempt took itself (after its calls ended): the Locker
	// sends no Abandon for it.
	ErrGivenBack = errors.New("backend: the attempt's grants were given back")
	// ErrNotAwaited is a node's entry in QuorumError.Nodes when its reply
	// was not waited for: the other nodes had decided.
	ErrNotAwaited = errors.New("reply not awaited: the other nodes decided")
)

// QuorumError says why a Redlock attempt did not win its quorum, node by
// node. It matches ErrNotAcquired when owners holding the lock on some nodes
// stood in the way, and ErrUnavailable when nodes that failed or did not
// answer did (too few answered to call it contention); it unwraps to the
// nodes' errors. (mutex.QuorumError is this type.)
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
// made a quorum. Nodes whose reply was not awaited did not fail.
func (e *QuorumError) outage() bool {
	failed := 0
	for _, err := range e.Nodes {
		if err != nil && err != ErrNotAcquired && err != ErrNotAwaited {
			failed++
		}
	}
	return e.Late || len(e.Nodes)-failed < e.Quorum
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString("mutex: Redlock: ")
	b.WriteString(strconv.Itoa(e.granted()))
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

// GivenBack marks err, an Acquire's error, as matching ErrGivenBack, and
// keeps its text and the rest of its chain (errors.As still finds a
// *QuorumError in it).
func GivenBack(err error) error {
	if err == nil {
		return nil
	}
	return &givenBack{err}
}

type givenBack struct{ err error }

func (e *givenBack) Error() string   { return e.err.Error() }
func (e *givenBack) Unwrap() []error { return []error{e.err, ErrGivenBack} }
