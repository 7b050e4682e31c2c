// Package redisdriver is the backend.Backend of one Redis deployment
// (standalone, Sentinel or Cluster): New builds a Driver over a go-redis
// client, and mutex.New a Locker over the Driver, which it then owns (the
// Locker's Close closes the Driver; the client stays the caller's):
//
//	d, err := redisdriver.New(rdb, redisdriver.WithPrefix("billing:"))
//	...
//	locker, err := mutex.New(d)
//
// Each lock is one Redis key holding the holder, its count, its lease and
// the fencing counter; Lua scripts (package redisproto) change it
// atomically, so owner and token are compared on the server. Keys reach the
// Driver as the caller names them; the Driver puts its prefix (WithPrefix)
// on every Redis key and channel it writes.
//
// Beyond Backend, a Driver is a backend.Watcher (a release publishes on the
// key's channel: PUBLISH, or sharded SPUBLISH on Cluster), a HandOffer (the
// handoff script releases and grants in one round trip), a Queuer (a
// sorted set of waiting Lockers per key, for fair turns), a ReplicaAcker
// (WAIT), a BulkReleaser (one pipeline) and a Batcher (one script takes
// the keys of one hash slot, all or none: every key of a standalone or
// Sentinel deployment, a slot's keys on Cluster).
//
// Deadlines: every call returns by its context's deadline even when the
// client was built without ContextTimeoutEnabled (go-redis then waits its
// read timeout on a hung server): such a call runs in a goroutine the
// Driver owns and Close waits for. With ContextTimeoutEnabled calls run on
// the caller's goroutine.
package redisdriver
