// Package redisrt is the runtime the Redis drivers (backend/redisdriver, one
// deployment; backend/redlockdriver, independent masters) share: how a
// go-redis call runs under a caller's deadline (Runner), the abandoned calls
// that clean-up must wait for (Abandoned), the Cluster slot map reload after
// a call got no answer (Reloader), and the release subscription (Subscriber,
// the engine behind a driver's backend.Watcher).
//
// Every goroutine it starts belongs to a Runner or a Subscriber, whose Close
// waits for it. Nothing here logs, and nothing here knows the Locker.
package redisrt
