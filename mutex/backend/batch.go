package backend

import "context"

// Batcher is optional: a Backend that takes several keys in one step, all
// or none (Redis: one script over keys of one Cluster slot). The Locker's
// LockAll orders its keys by (Group, key), tries each group's keys together
// first, and takes them one at a time, waiting for each in that order, when
// the try finds one held. Without it, every key is a group of its own,
// taken one at a time in key order.
type Batcher interface {
	// Group is key's group: keys of one group can be taken in one
	// AcquireAll. It depends on key alone (a hash slot, never the server
	// that holds the slot now), so that every Locker of the backend orders
	// keys alike, the whole of LockAll's deadlock freedom.
	Group(key string) int
	// AcquireAll makes one attempt at the keys of as: distinct, of one
	// Group, with one Owner, TTL and Shared, and no Waiter. It either
	// takes every key, each as Acquire would alone (its own new token, or
	// a re-entry for an owner that holds it already), and returns their
	// grants in order with busy -1; or, when another owner holds one of the
	// keys, changes nothing and returns nil and busy, the index of that
	// key. An error leaves the outcome unknown for every key: the Locker
	// frees what it may have taken (Abandon of each key, for its random
	// owners) unless the error matches ErrGivenBack, as after Acquire.
	AcquireAll(ctx context.Context, as []Attempt) (grants []Grant, busy int, err error)
}
