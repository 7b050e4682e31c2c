package mutex

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// MaxKeyLen bounds user keys, in bytes; Redis would take more, but a longer
// key is almost always a bug (a body used as a key).
const MaxKeyLen = 4096

// cleanupTimeout bounds the clean-up after a failed or abandoned attempt,
// which runs on its own context, never on the caller's dead one.
const cleanupTimeout = 2 * time.Second

// Locker hands out locks on keys of one Redis deployment (standalone,
// Sentinel or Cluster). It is safe for concurrent use. It owns background
// work (renewal, the release subscription); Close stops it.
type Locker struct {
	client   redis.UniversalClient
	cfg      config
	err      error // bad construction, returned by every call
	cluster  bool
	publish  string       // PUBLISH, or SPUBLISH on Cluster
	ctxAware bool         // the client applies ctx deadlines to its sockets
	reloaded atomic.Int64 // Cluster: when noAnswer last asked for a slot map reload, Unix ns
	tel      *telemetry

	// Redlock (NewRedlock): the independent masters, all of them including
	// client; nil for a single deployment.
	be        store             // where the locks are held: single, redlock or external
	insp      backend.Inspector // an outside backend's inspection, nil without (NewWithBackend)
	nodes     []redis.UniversalClient
	addrs     []string   // by node, for errors; "" where unknown
	rests     []nodeRest // by node: resting after failing to answer (noderest.go)
	restEpoch time.Time  // what rests are counted from
	quorum    int

	held       atomic.Int64 // Locks of this Locker not yet released or lost
	waiters    atomic.Int64 // calls in the local queues (queue.go); an Unlock with none looks for no one to hand off to or wake
	fenceTTLMs string       // keyTTL for leases up to half the fence TTL

	id          string        // this Locker's id in the waiting queues
	ownerSuffix string        // "@" and the OwnerInfo, ending every owner id it makes
	done        chan struct{} // closed by Close
	subs        *subscriber
	renew       *renewer
	bg          sync.WaitGroup // clean-ups and abandoned calls
	work        workers        // reusable goroutines for bg

	// Lock order: mu, then work.mu. mu is never held while calling into
	// subs or renew, which call back into the Locker (wakeLocal) under
	// their own mutexes released first; a Lock's mu is never taken under it.
	mu     sync.Mutex // guards closed, queues and the queues' waiters
	closed bool
	queues map[string]*queue
}

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
	l.client = client
	switch c := client.(type) {
	case nil:
		l.err = invalid("nil redis client")
	case *redis.Client:
		if c == nil {
			l.err = invalid("nil redis client")
		} else {
			l.ctxAware = c.Options().ContextTimeoutEnabled
		}
	case *redis.ClusterClient:
		if c == nil {
			l.err = invalid("nil redis client")
		} else {
			l.cluster, l.publish = true, "SPUBLISH"
			l.ctxAware = c.Options().ContextTimeoutEnabled
		}
	}
	l.be = single{l}
	return l
}

// newLocker is the local machinery every backend shares; the caller sets
// the backend.
func newLocker(opts []Option) *Locker {
	l := &Locker{
		cfg:     newConfig(opts),
		publish: "PUBLISH",
		done:    make(chan struct{}),
		queues:  map[string]*queue{},
	}
	l.err = l.cfg.err
	l.ownerSuffix = encodeOwnerInfo(l.cfg.info)
	if len(l.ownerSuffix) > maxOwnerInfo && l.err == nil {
		l.err = invalid("OwnerInfo of %d bytes encoded exceeds %d", len(l.ownerSuffix), maxOwnerInfo)
	}
	l.id = l.newOwner()
	l.fenceTTLMs = strconv.FormatInt(l.cfg.fenceTTL.Milliseconds(), 10)
	l.tel = newTelemetry(l.cfg.tp, l.cfg.mp)
	l.subs = newSubscriber(l)
	l.renew = newRenewer(l)
	return l
}

// Close stops renewal and the subscription, releases the locks this Locker
// still holds (their contexts end with ErrReleased), makes waiting Lock calls
// return ErrClosed, and waits for all its goroutines. Later calls return
// ErrClosed. It returns the release errors, if any.
//
// A Redlock Locker's release takes at most twice the node timeout, however
// many locks it holds and however hung a node. Waiting for its goroutines
// also waits for calls already sent to a hung node: a client without
// ContextTimeoutEnabled ends them only at its ReadTimeout (go-redis's
// default is 5s in v9.23), one with it at the call's deadline.
func (l *Locker) Close() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	close(l.done)
	l.mu.Unlock()

	held := l.renew.stop()
	var errs []error
	if len(held) > 0 && l.err == nil {
		if err := l.be.releaseAll(held); err != nil {
			errs = append(errs, err)
		}
		for _, lk := range held {
			lk.finish(ErrReleased, "")
		}
	}
	l.renew.halt()
	l.subs.close()
	l.bg.Wait()
	return errors.Join(errs...)
}

// now is the Locker's clock (WithClock).
func (l *Locker) now() time.Time { return l.cfg.now() }

// Err returns the construction error (wrapping ErrInvalid) that every call
// of the Locker returns, or nil. Adapters use it to report a bad Locker when
// they are built rather than while serving.
func (l *Locker) Err() error {
	if l == nil {
		return invalid("nil Locker")
	}
	return l.err
}

func (l *Locker) check(ctx context.Context, key string) error {
	switch {
	case l == nil:
		return invalid("nil Locker")
	case l.err != nil:
		return l.err
	case ctx == nil:
		return invalid("nil context")
	case key == "":
		return invalid("empty key")
	case len(key) > MaxKeyLen:
		return invalid("key of %d bytes exceeds %d", len(key), MaxKeyLen)
	}
	return nil
}

// lockKey is the Redis key of a user key (redisproto.LockKey).
func (l *Locker) lockKey(key string) string { return redisproto.LockKey(l.cfg.prefix, key) }

// keyTTL is how long the Redis key lives past its last use: the fencing
// counter's life, and never shorter than the lease.
func (l *Locker) keyTTL(lease time.Duration) string {
	if lease <= l.cfg.fenceTTL/2 { // no lease*2: it must not overflow
		return l.fenceTTLMs
	}
	return strconv.FormatInt((lease * 2).Milliseconds(), 10)
}

// call runs fn under ctx's deadline. When the client does not apply ctx
// deadlines to its sockets, fn runs in a goroutine the caller stops waiting
// for when ctx ends; pending then reports fn's eventual result, so clean-up
// can wait for a command that might still reach the server.
func (l *Locker) call(ctx context.Context, fn func(context.Context) error) (pending <-chan error, err error) {
	return l.callIn(ctx, l.direct(ctx), fn)
}

// interruptible is call for inspection, which a person interrupts: a client
// that applies ctx's deadline to its sockets still does not stop reading
// when ctx is cancelled, so the call runs apart unless ctx cannot end.
func (l *Locker) interruptible(ctx context.Context, fn func(context.Context) error) (pending <-chan error, err error) {
	return l.callIn(ctx, ctx.Done() == nil, fn)
}

func (l *Locker) callIn(ctx context.Context, direct bool, fn func(context.Context) error) (pending <-chan error, err error) {
	if direct {
		return nil, fn(ctx)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	res := make(chan error, 1)
	l.goBg(func() { res <- fn(ctx) })
	select {
	case err := <-res:
		return nil, err
	case <-ctx.Done():
		return res, ctx.Err()
	}
}

// direct reports whether a call under ctx can run on the caller's goroutine:
// the client applies ctx's deadline itself, or there is none.
func (l *Locker) direct(ctx context.Context) bool { return l.ctxAware || ctx.Done() == nil }

// afterward runs fn in the background, owned by the Locker (Close waits for
// it): first it waits for an abandoned call to finish, so that fn comes after
// whatever that call did on the server, then it runs fn on its own bounded
// context, never on the caller's dead one.
func (l *Locker) afterward(pending <-chan error, fn func(ctx context.Context)) {
	l.goBg(func() {
		if pending != nil {
			<-pending
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		fn(ctx)
	})
}

// cleanupAfter frees what an attempt whose outcome is unknown (a network
// error, or a deadline hit mid-call) may have acquired.
func (l *Locker) cleanupAfter(lockKey, owner string, pending <-chan error) {
	l.afterward(pending, func(ctx context.Context) {
		_ = redisproto.AbandonScript.Run(ctx, l.client, []string{lockKey, redisproto.ChannelOf(lockKey)}, owner, l.keyTTL(0), l.publish).Err()
	})
}

// retryRelease tries once more to release a lock whose Unlock failed on the
// server.
func (l *Locker) retryRelease(lk *Lock, pending <-chan error) {
	l.afterward(pending, func(ctx context.Context) {
		if l.be.releaseAgain(ctx, lk) == nil {
			l.wakeLocal(lk.key)
		}
	})
}
