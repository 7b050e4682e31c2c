package mutex

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Lock acquires the lock on key, waiting until it is free or ctx ends.
//
// Waiting does not make a herd: goroutines of one Locker waiting for one key
// queue here in arrival order and only the head of the queue tries Redis. A
// release by another process reaches the head through pub/sub, a release in
// this process wakes it directly, and a jittered poll bounded by the
// holder's remaining lease (WithRetry) covers lost notifications and holders
// that died.
//
// Passing a context of a held Lock on the same key (lk.Context() or one
// derived from it) re-enters it: the same *Lock comes back with its count
// raised, with no round trip. An acquisition with the owner id of the
// current holder (WithOwner) re-enters in Redis: count+1, same token.
//
// Lock waits for as long as ctx allows, also while Redis is unreachable:
// pass a ctx with a deadline. Attempts that fail on the server are retried
// with the backoff, counted (redfence.lock.attempt.errors) and recorded on the
// span. When ctx ends first, returns errors.Join(ErrNotAcquired, ctx.Err())
// and, when the last attempts failed on the server or none got an answer, an
// error matching ErrUnavailable that wraps the server's. Whatever an attempt
// cut short may have taken is freed on a context of its own.
func (l *Locker) Lock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, "redfence.Lock", key, true, opts)
}

// TryLock makes one attempt: it returns the lock, ErrNotAcquired when another
// owner holds it (at once, without waiting), or an error matching
// ErrUnavailable that wraps the server's (for Redlock, a *QuorumError). It
// re-enters like Lock. Waiters go first: when Lock calls of this Locker wait
// for the key, TryLock returns ErrNotAcquired without asking Redis, and a
// lock just released to another Locker's waiter (reserved for it, for at
// most 50 ms, until it takes it) counts as held.
func (l *Locker) TryLock(ctx context.Context, key string, opts ...LockOption) (*Lock, error) {
	return l.lock(ctx, "redfence.TryLock", key, false, opts)
}

// Do runs fn while holding the lock on key: Lock, fn, Unlock. fn's context
// (lk.Join(ctx)) ends when ctx ends or the lock is lost; context.Cause says
// which. It returns fn's error; an Unlock error only when fn succeeded. The
// Unlock runs on a context of its own, so it happens even when ctx has
// ended. If fn panics the lock is released and the panic goes on.
func (l *Locker) Do(ctx context.Context, key string, fn func(ctx context.Context, lk *Lock) error, opts ...LockOption) (err error) {
	if fn == nil {
		return invalid("nil function")
	}
	lk, err := l.Lock(ctx, key, opts...)
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if uerr := lk.Unlock(uctx); err == nil && !errors.Is(uerr, ErrNotHeld) {
			err = uerr
		}
	}()
	fctx, cancel := lk.Join(ctx)
	defer cancel()
	return fn(fctx, lk)
}

type acquireResult struct {
	status    int64 // 0 held by another, 1 acquired, 2 re-entered
	token     int64
	tokenStr  string          // the token as the script returned it, if a string
	remaining time.Duration   // holder's remaining lease when status is 0
	why       error           // Redlock, status 0: the nodes' answers (*QuorumError)
	settled   <-chan struct{} // Redlock: closed when late nodes were raised too
	lateNodes []int           // Redlock: nodes that granted after the quorum
	lateDone  []atomic.Bool   // Redlock: by node, late node settled
}

func (l *Locker) lock(ctx context.Context, spanName, key string, wait bool, opts []LockOption) (*Lock, error) {
	if err := l.check(ctx, key); err != nil {
		return nil, err
	}
	lc := newLockConfig(opts)
	if lc.err != nil {
		return nil, lc.err
	}
	if l.nodes != nil && lc.replicas > 0 {
		return nil, invalid("WithReplicaAck does not apply to Redlock, whose nodes are independent masters")
	}
	start := time.Now()
	ctx, span := l.tel.startSpan(ctx, spanName, key, 0)
	outcome := func(lk *Lock, attempts int, outcome string, err error) {
		wait := time.Since(start)
		if span.IsRecording() {
			span.SetAttributes(attrAttempts.Int(attempts), attrWait.Float64(wait.Seconds()),
				attrReentrant.Bool(outcome == "reentered"))
			if lk != nil {
				span.SetAttributes(attrToken.Int64(lk.token))
			}
		}
		endSpan(span, outcome, err)
		bg := context.Background()
		o := l.tel.outcomeAttrs(outcome)
		l.tel.acquireDur.Record(bg, wait.Seconds(), o.record...)
		l.tel.acquired.Add(bg, 1, o.add...)
	}

	if lk := heldIn(ctx, l, key); lk != nil && lk.reenter() {
		outcome(lk, 0, "reentered", nil)
		return lk, nil
	}
	if err := ctx.Err(); err != nil {
		err = errors.Join(ErrNotAcquired, err)
		outcome(nil, 0, "cancelled", err)
		return nil, err
	}

	owner := lc.owner
	randomOwner := owner == ""
	if randomOwner {
		owner = newOwnerID()
	}
	lockKey := l.lockKey(key)

	var handoffTo *lockConfig
	if l.nodes == nil && lc.replicas == 0 {
		handoffTo = &lc // a local Unlock may hand the lock straight to us
	}
	w, err := l.enqueue(key, wait, owner, handoffTo)
	if err != nil {
		outcome(nil, 0, "closed", err)
		return nil, err
	}
	acquired := false
	defer func() { l.dequeue(key, w, acquired) }()

	// giveBack frees a lock handed over just as this call gave up.
	giveBack := func(h handoff) {
		if h.ok {
			l.releaseBehind(lockKey, owner, strconv.FormatInt(h.token, 10))
		}
	}
	// Wait for our turn at the head of the local queue.
	select {
	case <-w.turn:
	case <-ctx.Done():
		if h, ok := l.unpark(w); ok { // promoted and handed the lock meanwhile
			giveBack(h)
		}
		err := errors.Join(ErrNotAcquired, ctx.Err())
		outcome(nil, 0, "timeout", err)
		return nil, err
	case <-l.done:
		if h, ok := l.unpark(w); ok {
			giveBack(h)
		}
		outcome(nil, 0, "closed", ErrClosed)
		return nil, ErrClosed
	}

	bo := backoff{min: lc.retryMin, max: lc.retryMax}
	quiet := w.quiet // a local goroutine just took the lock: wait for its release first
	subscribed := false
	attempts := 0
	var remaining time.Duration
	var lastErr error // the last attempt's server error, until an attempt is answered
	answered := false // an attempt got the server's answer
	// takeOffer turns a hand-off into this call's Lock.
	takeOffer := func(h handoff) (*Lock, error) {
		lk := newLock(ctx, l, key, lockKey, owner, h.token, "", &lc, h.sent)
		if err := l.renew.add(lk); err != nil {
			lk.finish(ErrReleased, "")
			l.cleanupAfter(lockKey, owner, nil)
			outcome(nil, attempts, "closed", err)
			return nil, err
		}
		acquired = true
		outcome(lk, attempts, "acquired", nil)
		return lk, nil
	}
	for {
		if !quiet {
			attempts++
			if randomOwner && attempts > 1 {
				// A fresh id per attempt, so that the clean-up of an earlier
				// attempt (a late grant given back, an abandoned call) can
				// never free this one's acquisition, nor this one re-enter
				// what that clean-up is about to free.
				owner = newOwnerID()
				l.renameWaiter(w, owner)
			}
			sent := l.now()
			// A call that found no local waiter before it makes its first
			// attempt as a TryLock would (fewer arguments); only when that
			// finds the lock held does it queue, with the retry that follows
			// its subscription.
			res, pending, err := l.acquire(ctx, key, lockKey, owner, &lc, wait && !(attempts == 1 && w.first))
			if err == nil && res.status == 1 && l.nodes == nil && !l.now().Before(sent.Add(lc.ttl-l.drift(lc.ttl))) {
				// The lease ran out before its grant arrived: as a failed
				// attempt, it is freed behind us (cleanupAfter), never
				// handed out already lost.
				err = fmt.Errorf("the reply took %v, longer than the lease of %v allows", l.now().Sub(sent), lc.ttl)
			}
			switch {
			case err != nil:
				if randomOwner && l.nodes == nil { // Redlock's attempt cleaned up after itself
					l.cleanupAfter(lockKey, owner, pending)
				}
				if ctx.Err() != nil {
					// Cut short: an earlier attempt's failure, or the lack
					// of any answer, still says why none succeeded.
					if e := lastErrIf(err, ctx); e != nil {
						lastErr = unavailable(e)
					} else if lastErr == nil && !answered {
						lastErr = unavailable(errNoAnswer)
					}
					err := errors.Join(ErrNotAcquired, ctx.Err(), lastErr)
					outcome(nil, attempts, "timeout", err)
					return nil, err
				}
				err = unavailable(err)
				l.tel.attemptFailed(span, err)
				if !wait {
					outcome(nil, attempts, "error", err)
					return nil, err
				}
				lastErr, remaining = err, 0
			case res.status == 0:
				l.tel.contention.Add(context.Background(), 1)
				lastErr, answered = nil, true
				if !wait {
					err := error(ErrNotAcquired)
					if res.why != nil {
						err = res.why
					}
					outcome(nil, attempts, "contended", err)
					return nil, err
				}
				remaining = res.remaining
			default:
				lk := newLock(ctx, l, key, lockKey, owner, res.token, res.tokenStr, &lc, sent)
				lk.settled, lk.lateNodes, lk.lateDone = res.settled, res.lateNodes, res.lateDone
				// Into the renewer first: from here its lease deadline is
				// watched, also while replicaAck waits.
				if err := l.renew.add(lk); err != nil {
					lk.finish(ErrReleased, "")
					l.cleanupAfter(lockKey, owner, nil)
					outcome(nil, attempts, "closed", err)
					return nil, err
				}
				if err := l.replicaAck(ctx, lk, &lc); err != nil {
					outcome(nil, attempts, "replica_ack", err)
					return nil, err
				}
				acquired = true
				if res.status == 2 {
					outcome(lk, attempts, "reentered", nil)
				} else {
					outcome(lk, attempts, "acquired", nil)
				}
				return lk, nil
			}
			if !subscribed {
				// Subscribe, then try again at once: a release between the
				// failed attempt and the subscription would be missed.
				subscribed = true
				l.subscribe(ctx, key, lockKey, w)
				continue
			}
		}
		quiet = false

		d := bo.next()
		if remaining > 0 && d > remaining+time.Millisecond {
			d = remaining + time.Millisecond
		}
		t := time.NewTimer(d)
		l.park(w)
		select {
		case <-w.wake:
		case <-t.C:
		case h := <-w.offer:
			// Reserved and served before we left the wait.
			t.Stop()
			l.mu.Lock()
			w.parked, w.reserved = false, false
			l.mu.Unlock()
			if h.ok {
				return takeOffer(h)
			}
			continue
		case <-ctx.Done():
			t.Stop()
			if h, ok := l.unpark(w); ok {
				giveBack(h)
			}
			err := errors.Join(ErrNotAcquired, ctx.Err(), lastErr)
			outcome(nil, attempts, "timeout", err)
			return nil, err
		case <-l.done:
			t.Stop()
			if h, ok := l.unpark(w); ok {
				giveBack(h)
			}
			outcome(nil, attempts, "closed", ErrClosed)
			return nil, ErrClosed
		}
		t.Stop()
		if h, ok := l.unpark(w); ok && h.ok {
			return takeOffer(h)
		}
	}
}

func lastErrIf(err error, ctx context.Context) error {
	if errors.Is(err, ctx.Err()) {
		return nil
	}
	return err
}

// errNoAnswer: a Lock gave up before any of its attempts got an answer.
var errNoAnswer = errors.New("no answer from Redis before the context ended")

// releaseBehind releases, in the background, a lock handed over to a call
// that gave up meanwhile.
func (l *Locker) releaseBehind(lockKey, owner, token string) {
	l.afterward(nil, func(ctx context.Context) {
		_ = releaseScript.Run(ctx, l.client, l.releaseKeys(lockKey), l.releaseArgs(owner, token)...).Err()
	})
}

// acquire runs the acquire script once. On an error whose outcome is unknown,
// pending (if not nil) reports when the abandoned call finished.
//
// queued (Lock, not TryLock) puts this Locker in the key's waiting queue when
// the lock is held, so that a release reserves it for us in turn, and marks
// the lock waited-for, so that its release notifies.
func (l *Locker) acquire(ctx context.Context, key, lockKey, owner string, lc *lockConfig, queued bool) (acquireResult, <-chan error, error) {
	if l.nodes != nil {
		res, err := l.redlockAcquire(ctx, lockKey, owner, lc, queued)
		return res, nil, err
	}
	var (
		res     acquireResult
		err     error
		pending <-chan error
	)
	if l.direct(ctx) { // no closure: the uncontended path allocates less
		res, err = l.acquireOnce(ctx, key, lockKey, owner, lc, queued)
	} else {
		var r acquireResult
		pending, err = l.call(ctx, func(ctx context.Context) error {
			var err error
			r, err = l.acquireOnce(ctx, key, lockKey, owner, lc, queued)
			return err
		})
		if pending != nil {
			// The call was abandoned and may still be writing r.
			return acquireResult{}, pending, err
		}
		res = r
	}
	if err == nil && queued {
		l.setInRedisQueue(key, res.status == 0)
	}
	return res, nil, err
}

// acquireOnce is one call of the acquire script on a single deployment.
func (l *Locker) acquireOnce(ctx context.Context, key, lockKey, owner string, lc *lockConfig, queued bool) (acquireResult, error) {
	// Optional arguments and keys are left out when not needed: each one
	// costs the server work on every call (see bench/README.md).
	keys := []string{lockKey}
	args := make([]any, 0, 6)
	args = append(args, owner, lc.ttl.Milliseconds())
	if keyTTL := l.keyTTL(lc.ttl); keyTTL != defaultKeyTTLMs || queued {
		args = append(args, keyTTL)
	}
	if queued {
		keys = append(keys, queueOf(lockKey))
		args = append(args, "", l.id)
		if l.inRedisQueue(key) {
			args = append(args, "1")
		}
	}
	reply, err := acquireScript.Run(ctx, l.client, keys, args...).Result()
	if err != nil {
		return acquireResult{}, err
	}
	n, tokenStr, err := parseAcquire(reply)
	if err != nil {
		return acquireResult{}, err
	}
	return acquireResult{status: n[0], token: n[1], tokenStr: tokenStr, remaining: time.Duration(n[2]) * time.Millisecond}, nil
}

// parseAcquire reads the acquire script's reply as {status, token,
// remaining ms} (see acquire.lua): the token alone when acquired, minus the
// remaining lease when held, a table when re-entered. tokenStr is the token
// as the script wrote it, when it sent a string: the Lock keeps it and
// formats nothing.
func parseAcquire(reply any) (n [3]int64, tokenStr string, err error) {
	switch r := reply.(type) {
	case int64:
		if r < 0 {
			return [3]int64{0, 0, -r}, "", nil
		}
	case string:
		tok, err := strconv.ParseInt(r, 10, 64)
		if err != nil {
			return n, "", fmt.Errorf("mutex: unexpected reply from the acquire script: %w", err)
		}
		return [3]int64{1, tok, 0}, r, nil
	case []any:
		if len(r) != 3 {
			break
		}
		for i, v := range r {
			if n[i], err = replyInt(v); err != nil {
				return n, "", fmt.Errorf("mutex: unexpected reply from the acquire script: %w", err)
			}
		}
		tokenStr, _ = r[1].(string)
		return n, tokenStr, nil
	}
	return n, "", fmt.Errorf("mutex: unexpected reply from the acquire script: %v", reply)
}

// replyInt reads an integer of a script reply: a Redis integer, or digits
// in a bulk string (the acquire script passes its token on as it wrote it).
func replyInt(v any) (int64, error) {
	switch v := v.(type) {
	case int64:
		return v, nil
	case string:
		return strconv.ParseInt(v, 10, 64)
	}
	return 0, fmt.Errorf("unexpected %T", v)
}

// replicaAck waits for WithReplicaAck's replicas. WAIT counts the writes of
// the connection it runs on, and the acquisition may have used another one;
// an extend on the same pipelined connection first makes that connection's
// offset cover the acquisition. Too few acks: release and fail.
func (l *Locker) replicaAck(ctx context.Context, lk *Lock, lc *lockConfig) error {
	if lc.replicas == 0 {
		return nil
	}
	var acks int64
	calls := l.extendCalls([]*Lock{lk}, []time.Duration{lc.ttl})
	_, err := l.call(ctx, func(ctx context.Context) error {
		var wait *redis.IntCmd
		_, err := runScripts(ctx, l.client, extendScript, calls, func(pipe redis.Pipeliner) {
			wait = redis.NewIntCmd(ctx, "wait", lc.replicas, lc.replicaTTL.Milliseconds())
			_ = pipe.Process(ctx, wait)
		})
		if err != nil {
			return err
		}
		acks = wait.Val()
		return nil
	})
	if err == nil && acks >= int64(lc.replicas) {
		return nil
	}
	lk.finish(ErrReleased, "")
	uctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	_ = releaseScript.Run(uctx, l.client, lk.keys(), l.releaseArgs(lk.owner, lk.tokenStr)...).Err()
	cancel()
	if err != nil {
		return errors.Join(ErrNotAcquired, err)
	}
	return errors.Join(ErrNotAcquired, &ReplicaAckError{Want: lc.replicas, Got: int(acks)})
}

// ReplicaAckError says how many replicas acknowledged an acquisition made
// with WithReplicaAck when that was too few.
type ReplicaAckError struct{ Want, Got int }

func (e *ReplicaAckError) Error() string {
	return "mutex: " + strconv.Itoa(e.Got) + " of " + strconv.Itoa(e.Want) + " replicas acknowledged the lock"
}

// backoff is the fallback poll of one Lock call: exponential with full
// jitter between min and max.
type backoff struct {
	min, max time.Duration
	cur      time.Duration
}

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.min
	} else if b.cur < b.max {
		b.cur = min(b.cur*2, b.max)
	}
	return b.min + rand.N(b.cur-b.min+1)
}
