// Package mutexhooks lets the tests of other modules look inside a
// *mutex.Locker (its queues, its renewal loop, its key order) without
// adding to mutex's API: package mutex fills these variables when it is
// initialised, as package os fills internal/testlog. The Locker is passed
// as any because this package cannot import mutex (mutex imports it).
// Nothing but tests calls them.
package mutexhooks

import "time"

var (
	// WaitersOf counts the goroutines of l queued for key.
	WaitersOf func(l any, key string) int
	// LockerIDOf is the id l queues under in its backend.
	LockerIDOf func(l any) string
	// RenewWakes counts the times an acquisition woke l's renewal loop.
	RenewWakes func(l any) int64
	// RenewAsleep is when l's renewal loop plans to wake (zero while it
	// works).
	RenewAsleep func(l any) time.Time
	// IsUnsetGlobal reports whether tp (a trace.TracerProvider) is otel's
	// default global one.
	IsUnsetGlobal func(tp any) bool
	// StartsSpans reports whether l starts a span (recording or not) for a
	// lock operation now.
	StartsSpans func(l any) bool
	// OrderOf is the order LockAll takes keys in, their groups flattened.
	OrderOf func(l any, keys []string) []string
	// GroupOf is key's group in l's backend (backend.Batcher), -1 without
	// one.
	GroupOf func(l any, key string) int
	// SemaphoreSubscribed reports whether a goroutine of l waits for a
	// permit of name with the queue's release notifications asked for.
	SemaphoreSubscribed func(l any, name string) bool
	// SemaphoreWaiters counts the goroutines of l queued for a permit of
	// name.
	SemaphoreWaiters func(l any, name string) int
	// RWSubscribed is SemaphoreSubscribed for the read-write lock of name.
	RWSubscribed func(l any, name string) bool
)
