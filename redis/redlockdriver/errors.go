package redlockdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	invalidpkg "github.com/redfence/redfence/internal/invalid"
	"github.com/redfence/redfence/mutex/backend"
)

var (
	// errNoMajority: a Redlock call that no majority of nodes confirmed.
	errNoMajority = errors.New("mutex: Redlock: no majority of nodes confirmed")
	// errNodeResting: a node an attempt did not ask, since it failed to
	// answer lately (see nodeRest).
	errNodeResting = errors.New("not asked: it failed to answer lately and rests before it is asked again")
	// errAcquireReply: a node's acquire reply of no known shape.
	errAcquireReply = errors.New("mutex: unexpected reply from the acquire script")
	// ErrNotAwaited is a node's entry in QuorumError.Nodes when its reply
	// was not waited for: the other nodes had decided.
	ErrNotAwaited = errors.New("reply not awaited: the other nodes decided")
)

// QuorumError says why a Redlock attempt did not win its quorum, node by
// node. It matches backend.ErrNotAcquired when owners holding the lock on some nodes
// stood in the way, and backend.ErrUnavailable when nodes that failed or did not
// answer did (too few answered to call it contention); it unwraps to the
// nodes' errors.
type QuorumError struct {
	Quorum int      // grants needed
	Addrs  []string // by node, in New's order of clients; read-only
	// Nodes holds each node's answer: nil when it granted the lock,
	// backend.ErrNotAcquired when another owner held it there, otherwise its error.
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
		if err != nil && err != backend.ErrNotAcquired && err != ErrNotAwaited {
			failed++
		}
	}
	return e.Late || len(e.Nodes)-failed < e.Quorum
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	b.WriteString("redlockdriver: ")
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
		case err == backend.ErrNotAcquired:
			b.WriteString(": held by another owner")
		default:
			b.WriteString(": " + err.Error())
		}
	}
	return b.String()
}

// Is matches backend.ErrNotAcquired for contention and backend.ErrUnavailable for an outage.
func (e *QuorumError) Is(target error) bool {
	if e.outage() {
		return target == backend.ErrUnavailable
	}
	return target == backend.ErrNotAcquired
}

// Unwrap returns the errors of the nodes that failed.
func (e *QuorumError) Unwrap() []error {
	var errs []error
	for _, err := range e.Nodes {
		if err != nil && err != backend.ErrNotAcquired {
			errs = append(errs, err)
		}
	}
	return errs
}

// ErrorType is the error's class for telemetry's error.type.
func (e *QuorumError) ErrorType() string { return "quorum" }

func invalid(format string, args ...any) error {
	return invalidpkg.Errorf("redlockdriver", format, args...)
}

// unavailable marks err, the nodes' failure to answer, as an outage
// (backend.ErrUnavailable) while keeping it for errors.Is/As; the end of
// the caller's ctx stays what it is.
func unavailable(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, backend.ErrUnavailable) || ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return err
	}
	return fmt.Errorf("%w: %w", backend.ErrUnavailable, err)
}

// checkLease refuses a lease that names no lock, before any server is
// asked.
func (d *Driver) checkLease(ctx context.Context, l backend.Lease) error {
	if err := d.checkKey(l.Key); err != nil {
		return err
	}
	switch {
	case ctx == nil:
		return invalid("nil context")
	case l.Owner == "":
		return invalid("empty owner")
	case l.Token <= 0:
		return invalid("token %d is not positive", l.Token)
	}
	return nil
}
