package redlockdriver

import (
	"context"
	"errors"
	"fmt"

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
	// errNoPrefix: a key the Locker did not prefix.
	errNoPrefix = fmt.Errorf("%w: key without the driver's prefix", backend.ErrInvalid)
)

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{backend.ErrInvalid}, args...)...)
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
