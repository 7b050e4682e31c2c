package admin

import (
	"context"
	"unicode/utf8"

	"github.com/redfence/redfence/internal/hostlink"
	"github.com/redfence/redfence/mutex"
)

// ForceOptions say which holder a forced release ends, and who asks why.
type ForceOptions struct {
	// Token is the holder's token to end: when the key is held under
	// another token by then (the holder released it and someone else took
	// it), nothing changes. 0 ends whoever holds the key.
	Token int64
	// By names who forces it: a person or a tool. Default: this Locker's
	// mutex.OwnerInfo.
	By string
	// Reason says why, 1 to 1024 bytes: it goes to the audit stream, and
	// to the forced-release counter (keep it a short category there).
	Reason string
}

// ForceResult is what a forced release did.
type ForceResult struct {
	Key   string
	Token int64 // the holder's token, which lost the lock
	// Floor is the token the key keeps: every later acquisition gets a
	// larger one. Record it in the resource's fence (fenced's Guard.Raise)
	// to refuse the old holder's writes at once.
	Floor int64
	Owner string // the holder's owner id
	Info  mutex.OwnerInfo
	Count int // its count in Redis
	// Released is how many servers freed it: 1, or for Redlock the nodes.
	// ForceRelease succeeds only when fewer nodes than a quorum left the
	// outcome unknown: the holder can then renew on no majority.
	Released int
}

// ForceRelease frees key behind its holder's back, safely: the key keeps a
// token floor one above the holder's token, so every later acquisition
// gets a larger token, and the holder's next renewal, Extend or Unlock
// fails: with auto-renewal its Lock's context ends with ErrLockLost within
// one renewal interval (a third of its lease); without, at its next Extend
// or its lease deadline. Writes the holder still sends through
// a fence with its token are refused once a later token is recorded
// there; Guard.Raise(resource, Floor) records one at once. Waiters are
// notified. An audit entry (who, when, why, both tokens, the holder) goes
// to a stream beside the key, which Inspect shows; forced releases are
// counted (redfence.lock.forced_releases, by redfence.reason).
//
// A key that is free, reserved or whose lease ran out returns an error
// matching mutex.ErrNotHeld, as does one held under another token than
// o.Token. An outside backend forces through backend.Inspector, and
// without one returns an error matching errors.ErrUnsupported.
func (a *Admin) ForceRelease(ctx context.Context, key string, o ForceOptions) (ForceResult, error) {
	o, err := a.checkForce(ctx, key, o)
	if err != nil {
		return ForceResult{}, err
	}
	if a.in == nil {
		return ForceResult{}, errInspectUnsupported
	}
	return a.force(ctx, key, o)
}

// checkForce refuses bad input to ForceRelease and fills in o.By.
func (a *Admin) checkForce(ctx context.Context, key string, o ForceOptions) (ForceOptions, error) {
	if err := a.check(ctx, key); err != nil {
		return o, err
	}
	switch {
	case o.Reason == "" || len(o.Reason) > 1024:
		return o, invalid("a forced release needs a reason of 1 to 1024 bytes")
	case !utf8.ValidString(o.Reason) || !utf8.ValidString(o.By) || len(o.By) > 1024:
		return o, invalid("reason and by must be UTF-8, by at most 1024 bytes")
	case o.Token < 0:
		return o, invalid("negative token %d", o.Token)
	}
	if o.By == "" {
		info, _ := parseOwner(hostlink.ID(a.l))
		o.By = info.String()
	}
	return o, nil
}
