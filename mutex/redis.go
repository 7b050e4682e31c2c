package mutex

import (
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend/redisdriver"
	"github.com/redfence/redfence/mutex/backend/redlockdriver"
)

// The constructors of the Redis Lockers: the one file of the core that
// knows go-redis. The Redis code lives in the drivers (mutex/backend/
// redisdriver, mutex/backend/redlockdriver), which the Locker builds, owns
// and closes.

// New returns a Locker for one Redis deployment. client may be a
// *redis.Client (standalone or Sentinel via NewFailoverClient) or a
// *redis.ClusterClient; on Cluster, release notifications use sharded
// pub/sub (Redis 7+). A nil client or a bad option makes every call of the
// Locker return an error that says so (wrapping ErrInvalid); nothing panics.
//
// Deadlines: redfence enforces the caller's ctx deadline itself even when the
// client was built without ContextTimeoutEnabled (go-redis then waits its
// read timeout on a hung server); with it enabled, calls run without the
// extra goroutine that enforcement needs.
func New(client redis.UniversalClient, opts ...Option) *Locker {
	l := newLocker(opts)
	if client == nil || isNilPointer(client) {
		l.err = invalid("nil redis client")
		return l
	}
	d, err := redisdriver.New(client, redisdriver.Config{Prefix: l.cfg.prefix, FenceTTL: l.cfg.fenceTTL})
	if err != nil {
		l.err = err
		return l
	}
	l.drv = newDriver(d)
	l.drv.own = d
	return l
}

// NewRedlock returns a Locker over N ≥ 3 independent Redis masters (not
// replicas of one another, not a Cluster): a lock is held when a majority,
// N/2+1, granted it within its validity. The Locker has the API and the
// semantics of a single-deployment one (tokens, renewal, reentrancy,
// waiting, telemetry); see the package documentation for the algorithm and
// what it assumes. A bad argument returns an error wrapping ErrInvalid.
//
// A master that stopped answering (a call still out at the node timeout,
// or one that could not reach it) rests: acquisitions with the Locker's own
// owner ids count it as a refusal without asking it, for 100 ms after the
// first failure, doubling up to a second, then ask it again; an answer
// within the node timeout ends the rest. A paused or partitioned master then
// costs an acquisition nothing, where asking it would cost a node timeout's
// wait and a clean-up each time. Acquisitions never rest so many masters
// that fewer than a majority would be asked, and WithOwner acquisitions ask
// every master. A lock taken while masters rest is held on fewer of them,
// so its renewals have less slack: with 5 masters and 2 resting, one more
// that fails to confirm a renewal leaves no majority. A process so busy that
// its calls wait for connections past the node timeout rests healthy
// masters too (the pool size is the client's PoolSize).
func NewRedlock(clients []redis.UniversalClient, opts ...Option) (*Locker, error) {
	l := newLocker(opts)
	if l.err != nil {
		return nil, l.err
	}
	d, err := redlockdriver.New(clients, redlockdriver.Config{
		Prefix: l.cfg.prefix, FenceTTL: l.cfg.fenceTTL, NodeTimeout: l.cfg.nodeTimeout,
		Now: l.now, Drift: l.drift,
	})
	if err != nil {
		return nil, err
	}
	l.drv = newDriver(d)
	l.drv.own = d
	return l, nil
}

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
// Locker and for a backend that is no ClientHolder; httplock refuses such a
// Locker when it is built, and so does runner unless the backend claims
// slots itself (backend.SlotClaimer).
func (l *Locker) Client() redis.UniversalClient {
	if l == nil || l.drv.lend == nil {
		return nil
	}
	return l.drv.lend.Client()
}

// lent is the client a ClientHolder lent, asked once.
type lent struct{ c redis.UniversalClient }

func (h lent) Client() redis.UniversalClient { return h.c }

// lendOnce asks b for its client once: nil when it has none to lend.
func lendOnce(b any) ClientHolder {
	ch, ok := b.(ClientHolder)
	if !ok || isNilPointer(b) {
		return nil
	}
	if c := ch.Client(); c != nil && !isNilPointer(c) {
		return lent{c}
	}
	return nil
}
