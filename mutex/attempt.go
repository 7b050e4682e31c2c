package mutex

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

type acquireResult struct {
	status    int64 // 0 held by another, 1 acquired, 2 re-entered
	token     int64
	tokenStr  string        // the token as the script returned it, if a string
	remaining time.Duration // holder's remaining lease when status is 0
	why       error         // Redlock, status 0: the nodes' answers (*QuorumError)
	handle    any           // the backend's own state of the lock granted (Lock.handle)
}

// acquire runs the acquire script once. On an error whose outcome is unknown,
// pending (if not nil) reports when the abandoned call finished.
//
// queued (Lock, not TryLock) puts this Locker in the key's waiting queue when
// the lock is held, so that a release reserves it for us in turn, and marks
// the lock waited-for, so that its release notifies.
func (l *Locker) acquire(ctx context.Context, key, lockKey, owner string, lc *lockConfig, queued bool) (acquireResult, <-chan error, error) {
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
		keys = append(keys, redisproto.QueueOf(lockKey))
		args = append(args, "", l.id)
		if l.inRedisQueue(key) {
			args = append(args, "1")
		}
	}
	reply, err := redisproto.AcquireScript.Run(ctx, l.client, keys, args...).Result()
	if err != nil {
		return acquireResult{}, err
	}
	n, tokenStr, err := redisproto.ParseAcquire(reply)
	if err != nil {
		return acquireResult{}, err
	}
	return acquireResult{status: n[0], token: n[1], tokenStr: tokenStr, remaining: time.Duration(n[2]) * time.Millisecond}, nil
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
		_, err := redisproto.RunScripts(ctx, l.client, redisproto.ExtendScript, calls, func(pipe redis.Pipeliner) {
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
	_ = l.releaseLock(uctx, l.client, lk).Err()
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
