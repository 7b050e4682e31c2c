package mutex

import "github.com/redis/go-redis/v9"

// ClientHolder is a backend's capability to lend adapters that keep data
// next to their locks (httplock's shared responses, runner's slot claims,
// asynqlock's busy records) the Redis client of the one deployment that
// holds its locks. New's backend has it; Redlock's has not, since data kept
// on one of its masters would rest on that master alone. A NewWithBackend
// backend that implements it is asked once, when the Locker is built: a nil
// client there means none.
type ClientHolder interface {
	Client() redis.UniversalClient
}

// Client returns the Redis client the Locker's backend lends adapters (see
// ClientHolder): the one deployment of New, or what a NewWithBackend
// backend's Client returned. It is nil for a nil Locker, for a Redlock
// Locker and for a backend that is no ClientHolder; httplock and runner
// refuse such a Locker when they are built.
func (l *Locker) Client() redis.UniversalClient {
	if l == nil || l.be == nil {
		return nil
	}
	return l.be.client()
}
