package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redfence/redfence/mutex"
)

// State is what a lock key is in, as inspection sees it.
type State int

const (
	// Free: nobody holds the key (it may never have been locked, or its
	// lease ran out).
	Free State = iota
	// Held: an owner holds it.
	Held
	// Reserved: a release kept it for a moment for the Locker first in
	// its queue, which is about to take it.
	Reserved
)

func (s State) String() string {
	switch s {
	case Held:
		return "held"
	case Reserved:
		return "reserved"
	}
	return "free"
}

// LockInfo is a lock key as its servers see it, at ServerTime. For a
// Redlock Locker it is the quorum's view: Held when a majority of nodes
// hold it for one owner and token, with the lease a majority still grants;
// Nodes has what each node holds.
type LockInfo struct {
	Key   string // the key given to Lock
	Name  string // the Redis key that holds it
	State State
	// Token is the holder's fencing token; for a free key, the last token
	// issued (0: none is remembered), which every later one exceeds.
	Token int64
	// Owner is the holder's owner id, or the Locker a reserved key is kept
	// for; Info is what that Locker was given with WithOwnerInfo, read back
	// from the id for display: from an id the Locker made or one OwnerID
	// made (an election's), zero for an id of another shape, as WithOwner's
	// usually are.
	Owner string
	Info  mutex.OwnerInfo
	Count int // re-entries in Redis (WithOwner), plus one
	// AcquiredAt is when the token was issued, by the server's clock: a
	// token is the server's time in µs unless the clock stepped back or an
	// operator forced a release in the same microsecond, so it is read as
	// one (zero when it cannot be a time). On Redlock a token is mostly
	// the acquiring client's proposal, its clock 100 ms ahead, and is read
	// so: by that client's clock. RenewedAt is when the current lease
	// began, by the server's clock; Lease what is left of it.
	AcquiredAt time.Time
	RenewedAt  time.Time
	Lease      time.Duration
	// Waited: a waiting Lock found it held since it was acquired.
	Waited bool
	// Waiters are the Lockers queued for the key, longest waiting first (a
	// single deployment keeps this queue; Redlock does not). A Locker that
	// gave up stays listed until its turn comes and passes.
	Waiters []Waiter
	// Forced are the latest forced releases of the key, latest first
	// (Inspect only).
	Forced     []ForcedRelease
	ServerTime time.Time
	// Nodes is, for Redlock, each node's own view, by node.
	Nodes []NodeInfo
}

// Waiter is a Locker queued for a key.
type Waiter struct {
	Locker string // its id
	Info   mutex.OwnerInfo
	Since  time.Time     // its first attempt that found the key held (server clock)
	Waited time.Duration // until ServerTime
}

// ForcedRelease is an entry of a key's audit stream (see ForceRelease).
type ForcedRelease struct {
	ID     string // the stream entry's id
	At     time.Time
	By     string
	Reason string
	Token  int64  // the holder's, which lost the lock
	Floor  int64  // the token floor left behind: later tokens exceed it
	Owner  string // the holder's owner id
	Info   mutex.OwnerInfo
	Count  int
}

// NodeInfo is one Redlock node's view of a key.
type NodeInfo struct {
	Node int
	Addr string
	Info LockInfo // without Nodes
	Err  error
}

var errInspectUnsupported = fmt.Errorf("%w: this Locker's backend offers no inspection (backend.Inspector)", errors.ErrUnsupported)

// Inspect returns key's state as the backend holds it: owner, token,
// lease, waiters and the latest forced releases, changing nothing. The
// Redis drivers read it in one round trip per server, with a read-only
// script (EVALSHA_RO where the server has it), which a CLIENT PAUSE WRITE
// does not hold; a Redlock view is the quorum's, and a key the answering
// nodes cannot decide is an error matching mutex.ErrUnavailable, not free. A
// backend without backend.Inspector returns an error matching
// errors.ErrUnsupported; bad input one matching ErrInvalid.
func (a *Admin) Inspect(ctx context.Context, key string) (LockInfo, error) {
	if err := a.check(ctx, key); err != nil {
		return LockInfo{}, err
	}
	if a.in == nil {
		return LockInfo{}, errInspectUnsupported
	}
	st, err := a.in.Inspect(ctx, key)
	if err != nil {
		if len(st.Nodes) == 0 {
			return LockInfo{}, unavailable(err)
		}
		// Undecided: the nodes' own views, and the highest token they remember.
		return infoOf(key, st), unavailable(err)
	}
	return infoOf(key, st), nil
}
