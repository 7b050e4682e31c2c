// Package hostlink lets mutex/admin read what a Locker holds without a
// method on *mutex.Locker: package mutex sets these functions when it is
// initialised, as golang.org/x/tools/go/packages sets its internal
// accessors, and nothing else writes them.
package hostlink

import "time"

// Hold is a hold of a Locker as its process sees it.
type Hold struct {
	Key         string
	Token       int64
	Acquired    time.Time
	HeldFor     time.Duration
	Lease       time.Duration
	TTL         time.Duration
	Count       int
	AutoRenew   bool
	Renewals    int
	LastRenewal time.Duration
	Waiters     int
	Kind        string // "lock", "permit", "read" or "write"
}

var (
	// Held lists l's holds by key (l is a *mutex.Locker).
	Held func(l any) []Hold
	// Forced counts a forced release in l's telemetry.
	Forced func(l any, key string, token int64, reason string)
	// ID is l's owner id, which names it in waiting queues.
	ID func(l any) string
)
