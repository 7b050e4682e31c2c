package mutex

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// store is what a Locker needs of the servers that hold its locks: one
// deployment (single), N independent masters (redlock), or a
// backend.Backend from outside (external). The Locker's local machinery
// (queue, hand-off, reentrancy, lease deadline, renewal, loss signal,
// telemetry) is the same for all. docs/architecture.md states what every
// backend keeps.
type store interface {
	// acquire makes one attempt, sent at sent, for owner: granted (status
	// 1, or 2 re-entered), held by another (0, with the remaining lease), or
	// failed. A backend frees what a failed attempt of a random owner (lc
	// has none) may have taken, after the abandoned call ends, and refuses a
	// grant that arrives after its lease ran out.
	acquire(ctx context.Context, key, lockKey, owner string, lc *lockConfig, queued bool, sent time.Time) (acquireResult, error)
	// abandon frees, in the background, what owner (a random id) may hold
	// of lockKey.
	abandon(lockKey, owner string)
	// release takes one count of lk: the count left (0: freed), or -1 when
	// it was not held. pending, when set, reports the end of a call the
	// caller stopped waiting for.
	release(ctx context.Context, lk *Lock) (left int64, pending <-chan error, err error)
	// releaseAgain tries once more after a release failed on the server.
	releaseAgain(ctx context.Context, lk *Lock) error
	// releaseKeys are the release script's keys for lockKey, the first n
	// of keys (an array: no allocation on every Lock).
	releaseKeys(lockKey string) (keys [2]string, n int)
	// handOff: an Unlock may release and take the lock for the next local
	// waiter in one round trip (handOffTo).
	handOff() bool
	// handOffTo takes one count of lk and, when that frees it, grants it
	// to owner for ttl in the same step: the counts left (0: handed off,
	// with token and the grant's handle), or -1 when lk did not hold it.
	// pending, when set, reports the end of a call the caller stopped
	// waiting for.
	handOffTo(ctx context.Context, lk *Lock, owner string, ttl time.Duration) (left, token int64, handle any, pending <-chan error, err error)
	// releaseHandedOff releases, in the background, a lock handed over to
	// owner (token, handle) whose call gave up meanwhile.
	releaseHandedOff(lockKey, owner string, token int64, handle any)
	// replicaAck: WithReplicaAck applies (the servers have replicas).
	replicaAck() bool
	// extend sets the lease of each lock to its ttl: held, gone (the lock is
	// not the holder's any more), or unknown, with why for the unknown ones.
	// sent is when the extension was sent: the new lease deadlines run from
	// it.
	extend(ctx context.Context, locks []*Lock, ttls []time.Duration) (results []renewOutcome, sent time.Time, why error)
	// ttl is lk's remaining lease as the servers see it; negative when they
	// do not hold it.
	ttl(ctx context.Context, lk *Lock) (time.Duration, error)
	// releaseAll releases the locks Close found held, bounded in time.
	releaseAll(locks []*Lock) error
	// name is key's name in the backend.
	name(key string) string
	// watch asks for lockKey's release notifications, which wake key's
	// head waiter, until stop; ready is closed once they are established
	// (nil: nothing to wait for).
	watch(key, lockKey string) (ready <-chan struct{}, stop func())
	// targets are where the release channel ch is subscribed.
	targets(ch string) []target
	// servers are the clients that hold the lock keys, for inspection and
	// forced releases: one deployment's, or every Redlock node's; nil
	// when the Locker cannot reach them (an outside backend).
	servers() []redis.UniversalClient
	// client is the deployment's client for adapters, nil when no single
	// deployment holds the locks' data.
	client() redis.UniversalClient
}

// single is one Redis deployment: standalone, Sentinel or Cluster.
type single struct{ l *Locker }

func (b single) acquire(ctx context.Context, key, lockKey, owner string, lc *lockConfig, queued bool, sent time.Time) (acquireResult, error) {
	l := b.l
	res, pending, err := l.acquire(ctx, key, lockKey, owner, lc, queued)
	l.noAnswer(err)
	if err == nil && res.status == 1 {
		err = l.lateGrant(sent, lc.ttl)
	}
	if err != nil && lc.owner == "" {
		l.cleanupAfter(lockKey, owner, pending)
	}
	return res, err
}

// lateGrant refuses a grant whose lease, sent at sent, ran out (drift
// included) before it arrived: a failed attempt, freed by the caller,
// never handed out already lost.
func (l *Locker) lateGrant(sent time.Time, ttl time.Duration) error {
	if now := l.now(); !now.Before(sent.Add(ttl - l.drift(ttl))) {
		return fmt.Errorf("the reply took %v, longer than the lease of %v allows", now.Sub(sent), ttl)
	}
	return nil
}

func (b single) abandon(lockKey, owner string) { b.l.cleanupAfter(lockKey, owner, nil) }

// releaseKeys: the lock, and the queue of Lockers waiting for it.
func (b single) releaseKeys(lockKey string) ([2]string, int) {
	return [2]string{lockKey, redisproto.QueueOf(lockKey)}, 2
}

func (b single) handOff() bool { return true }

// handOffTo runs the handoff script: one round trip instead of a release,
// a notification and an acquire.
func (b single) handOffTo(ctx context.Context, lk *Lock, owner string, ttl time.Duration) (int64, int64, any, <-chan error, error) {
	l := b.l
	var vals []int64
	pending, err := l.call(ctx, func(ctx context.Context) error {
		v, err := redisproto.HandoffScript.Run(ctx, l.client, []string{lk.lockKey}, lk.owner, lk.tokenStr,
			owner, ttl.Milliseconds(), l.keyTTL(ttl)).Int64Slice()
		if err == nil && len(v) != 2 {
			err = errors.New("mutex: unexpected reply from the handoff script")
		}
		vals = v
		return err
	})
	if err != nil {
		return 0, 0, nil, pending, err // an abandoned call may still write vals
	}
	return vals[0], vals[1], nil, nil, nil
}

func (b single) releaseHandedOff(lockKey, owner string, token int64, _ any) {
	l := b.l
	l.afterward(nil, func(ctx context.Context) {
		keys, n := b.releaseKeys(lockKey)
		_ = redisproto.ReleaseScript.Run(ctx, l.client, keys[:n], l.releaseArgs(owner, strconv.FormatInt(token, 10), 0)...).Err()
	})
}
func (b single) replicaAck() bool { return true }

func (b single) release(ctx context.Context, lk *Lock) (int64, <-chan error, error) {
	l := b.l
	if l.direct(ctx) { // no closure: the uncontended path allocates less
		n, err := l.releaseLock(ctx, l.client, lk).Int64()
		l.noAnswer(err)
		return n, nil, err
	}
	var n int64
	pending, err := l.call(ctx, func(ctx context.Context) error {
		var err error
		n, err = l.releaseLock(ctx, l.client, lk).Int64()
		return err
	})
	l.noAnswer(err)
	if pending != nil {
		return 0, pending, err // the abandoned call may still write n
	}
	return n, nil, err
}

func (b single) releaseAgain(ctx context.Context, lk *Lock) error {
	return b.l.releaseLock(ctx, b.l.client, lk).Err()
}

// extend sends the extensions in one pipelined round trip. Its replies are
// read only when the call returned: one the caller stopped waiting for (a
// client without ContextTimeoutEnabled, a hung server) may still be
// running. The send time of the first try stands for a resend after
// NOSCRIPT too: an earlier start only moves the new deadline earlier.
func (b single) extend(ctx context.Context, locks []*Lock, ttls []time.Duration) ([]renewOutcome, time.Time, error) {
	sent := b.l.now()
	calls := b.l.extendCalls(locks, ttls)
	var cmds []*redis.Cmd
	var perr error
	pending, err := b.l.call(ctx, func(ctx context.Context) error {
		cmds, perr = redisproto.RunScripts(ctx, b.l.client, redisproto.ExtendScript, calls, nil)
		return nil
	})
	results := make([]renewOutcome, len(locks)) // renewUnknown
	if err != nil || pending != nil {
		b.l.noAnswer(err)
		return results, sent, err
	}
	b.l.noAnswer(perr)
	for i, v := range redisproto.ReplyInts(cmds) {
		switch v {
		case 1:
			results[i] = renewHeld
		case 0:
			results[i] = renewGone
		}
	}
	return results, sent, perr
}

func (b single) ttl(ctx context.Context, lk *Lock) (time.Duration, error) {
	var us int64
	_, err := b.l.call(ctx, func(ctx context.Context) error {
		var err error
		us, err = redisproto.TTLScript.Run(ctx, b.l.client, []string{lk.lockKey}, lk.owner, lk.tokenStr).Int64()
		return err
	})
	b.l.noAnswer(err)
	return time.Duration(us) * time.Microsecond, err
}

func (b single) releaseAll(locks []*Lock) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	cmds, _ := redisproto.RunScripts(ctx, b.l.client, redisproto.ReleaseScript, b.l.releaseCalls(locks), nil)
	var errs []error
	for _, cmd := range cmds {
		if err := cmd.Err(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (b single) targets(ch string) []target {
	if b.l.cluster {
		return []target{{name: ch, c: b.l.client}} // the channel's own sharded subscription
	}
	return []target{{name: "", c: b.l.client}}
}

func (b single) client() redis.UniversalClient { return b.l.client }

func (b single) servers() []redis.UniversalClient { return []redis.UniversalClient{b.l.client} }

func (b single) name(key string) string { return b.l.lockKey(key) }

func (b single) watch(key, lockKey string) (<-chan struct{}, func()) {
	return b.l.subs.watch(key, lockKey)
}

// redlock is N independent masters (NewRedlock).
type redlock struct{ l *Locker }

// acquire: a Redlock attempt gives back what it took itself, and checks
// its validity (TTL − elapsed − drift) before it counts a quorum.
func (b redlock) acquire(ctx context.Context, _, lockKey, owner string, lc *lockConfig, queued bool, _ time.Time) (acquireResult, error) {
	return b.l.redlockAcquire(ctx, lockKey, owner, lc, queued)
}

func (b redlock) releaseKeys(lockKey string) ([2]string, int) { return [2]string{lockKey}, 1 }
func (b redlock) handOff() bool                               { return false }

// handOffTo is never asked of Redlock (handOff is false): a release.
func (b redlock) handOffTo(ctx context.Context, lk *Lock, _ string, _ time.Duration) (int64, int64, any, <-chan error, error) {
	n, pending, err := b.release(ctx, lk)
	return n, 0, nil, pending, err
}

func (b redlock) releaseHandedOff(string, string, int64, any) {}               // never handed off
func (b redlock) replicaAck() bool                            { return false } // independent masters

// abandon runs the abandon script on every node.
func (b redlock) abandon(lockKey, owner string) {
	keys := []string{lockKey, redisproto.ChannelOf(lockKey)}
	for _, c := range b.l.nodes {
		b.l.afterward(nil, func(ctx context.Context) {
			_ = redisproto.AbandonScript.Run(ctx, c, keys, owner, b.l.keyTTL(0), b.l.publish).Err()
		})
	}
}

// release releases the nodes that carry lk's token now, and those still
// answering its acquisition once they have (releaseLate).
func (b redlock) release(ctx context.Context, lk *Lock) (int64, <-chan error, error) {
	now, later := lk.unsettled()
	if h := holdOf(lk); h != nil {
		h.releaseNodes = now
	}
	n, err := b.l.redlockRelease(ctx, lk, now)
	if len(later) > 0 {
		b.l.releaseLate(lk, later)
	}
	return n, nil, err
}

// releaseAgain releases once more the nodes of the release that failed;
// the late ones are releaseLate's, and a second release there would take a
// second count.
func (b redlock) releaseAgain(ctx context.Context, lk *Lock) error {
	nodes := allNodes(len(b.l.nodes))
	if h := holdOf(lk); h != nil {
		nodes = h.releaseNodes
	}
	_, err := b.l.redlockRelease(ctx, lk, nodes)
	return err
}

func (b redlock) extend(ctx context.Context, locks []*Lock, ttls []time.Duration) ([]renewOutcome, time.Time, error) {
	return b.l.redlockExtend(ctx, locks, ttls)
}

func (b redlock) ttl(ctx context.Context, lk *Lock) (time.Duration, error) {
	return b.l.redlockTTL(ctx, lk)
}

// releaseAll waits a node timeout once for all locks to settle and once for
// the release, whatever the number of locks; see Close's doc for the calls
// already out to a hung node.
func (b redlock) releaseAll(locks []*Lock) error {
	var ttl time.Duration
	for _, lk := range locks {
		lk.mu.Lock()
		ttl = max(ttl, lk.ttl)
		lk.mu.Unlock()
	}
	timeout := b.l.nodeTimeout(ttl)
	settle := time.NewTimer(timeout)
	for _, lk := range locks {
		awaitSettled(lk, settle.C)
	}
	settle.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return b.l.redlockReleaseAll(ctx, timeout, locks)
}

// targets: every node, since a release publishes on each node that held
// the lock.
func (b redlock) targets(string) []target {
	out := make([]target, len(b.l.nodes))
	for i, c := range b.l.nodes {
		out[i] = target{name: "node" + strconv.Itoa(i), c: c}
	}
	return out
}

func (b redlock) client() redis.UniversalClient { return nil }

func (b redlock) servers() []redis.UniversalClient { return b.l.nodes }

func (b redlock) name(key string) string { return b.l.lockKey(key) }

func (b redlock) watch(key, lockKey string) (<-chan struct{}, func()) {
	return b.l.subs.watch(key, lockKey)
}
