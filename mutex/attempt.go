package mutex

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"time"
)

// replicaAck waits for WithReplicaAck's replicas (backend.ReplicaAcker).
// Too few acks: release and fail.
func (l *Locker) replicaAck(ctx context.Context, lk *Lock, lc *lockConfig) error {
	if lc.replicas == 0 {
		return nil
	}
	ls := lease(lk)
	ls.TTL = lc.ttl
	acks, err := l.drv.ra.AckReplicas(ctx, ls, lc.replicas, lc.replicaTTL)
	if err == nil && acks >= lc.replicas {
		return nil
	}
	lk.finish(ErrReleased, "")
	uctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	_, _ = l.release(uctx, lk)
	cancel()
	if err != nil {
		return errors.Join(ErrNotAcquired, err)
	}
	return errors.Join(ErrNotAcquired, &ReplicaAckError{Want: lc.replicas, Got: acks})
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
