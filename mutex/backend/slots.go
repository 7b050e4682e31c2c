package backend

import (
	"context"
	"time"
)

// SlotClaimer is optional: a Backend that keeps the slot claims and run
// records of periodic jobs (package runner). runner.New asks for it through
// mutex.Locker.Backend and refuses a Locker whose backend is none. Its
// methods return by their context's deadline, as a Backend's do.
//
// Keys arrive as the runner names them, its prefix on them, never a lock's
// key: a backend may keep them out of its listing of locks.
type SlotClaimer interface {
	// ClaimSlot claims c.Slot of c.Key unless a slot at or above it was
	// claimed, atomically for every client of the backend: true when this
	// call, or an earlier one with the same c.Claimer, claimed c.Slot.
	// Claims are kept at least c.TTL after the last one, then may be
	// forgotten (any slot can then be claimed). With c.Gap positive, a
	// backend that counts time on its servers also refuses every claim of
	// c.Key for c.Gap after this one, by the servers' clock, never less
	// (it may leave the gap out when its clock is coarser than c.Gap). An
	// error leaves the outcome unknown: the slot may be claimed and run by
	// no one, never by two.
	ClaimSlot(ctx context.Context, c SlotClaim) (claimed bool, err error)
	// PutRecord stores value under key for at least ttl, replacing what
	// was there.
	PutRecord(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// GetRecord returns what PutRecord last stored under key; found is
	// false when nothing is (never stored, or expired).
	GetRecord(ctx context.Context, key string) (value []byte, found bool, err error)
}

// SlotClaim is one claim of a job's slot.
type SlotClaim struct {
	Key  string
	Slot int64 // the slot's number; any int64
	// Claimer names the caller, the same across its retries of one slot,
	// so that a retry finds a claim whose first reply was lost. Not empty.
	Claimer string
	TTL     time.Duration // how long the claim is kept; positive
	Gap     time.Duration // the least time to the next claim; 0: none
}

// ServerClock is optional: a Backend whose servers have one clock a client
// can read (Redis's TIME). runner counts its slots on it when the backend
// has it, so that replicas whose clocks disagree agree on the slots; etcd
// has none, and the runner counts on its replica's clock.
type ServerClock interface {
	// ServerTime is the servers' time when they answered.
	ServerTime(ctx context.Context) (time.Time, error)
}
