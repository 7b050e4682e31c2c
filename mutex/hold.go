package mutex

import (
	"context"
	"time"
)

// Hold is what every hold of a Locker is (*Lock, *Locks, *Permit,
// *RWHold, and election's *Term): a fencing token for the resource, a
// context that ends when the hold is lost or released, and the local
// lease deadline. Code that writes under a hold (through package fenced,
// say) can take any of them.
type Hold interface {
	// Token is the fencing token to hand the resource with each write.
	Token() int64
	// Context ends when the hold is lost (cause matching ErrLockLost) or
	// released (ErrReleased).
	Context() context.Context
	// Deadline is the local lease deadline, when the context ends unless
	// a renewal succeeds first.
	Deadline() time.Time
}

var (
	_ Hold = (*Lock)(nil)
	_ Hold = (*Locks)(nil)
	_ Hold = (*Permit)(nil)
	_ Hold = (*RWHold)(nil)
)
