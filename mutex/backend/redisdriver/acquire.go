package redisdriver

import (
	"context"
	"time"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/mutex/internal/redisproto"
	"github.com/redfence/redfence/mutex/internal/redisrt"
)

// Acquire runs the acquire script once. An error leaves the outcome
// unknown and is returned as it is; when the call was given up on (ctx
// ended first on a client without ContextTimeoutEnabled), Abandon for
// a.Owner waits for it to end. A key without the prefix returns an error
// wrapping backend.ErrInvalid.
//
// a.Waiter (Lock, not TryLock) marks the lock waited-for, so that its
// release notifies, and puts the Locker in the key's queue when the key is
// held, so that a release reserves it for that Locker in turn.
func (d *Driver) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	lockKey, err := d.lockKey(a.Key)
	if err != nil {
		return backend.Grant{}, err
	}
	if a.Waiter != "" {
		d.noteWaiter(a.Waiter)
	}
	var g backend.Grant
	if d.run.Direct(ctx) { // no closure: the uncontended path allocates less
		g, err = d.acquireOnce(ctx, lockKey, a)
		d.reload.NoAnswer(err)
		return g, err
	}
	var r backend.Grant
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		r, err = d.acquireOnce(ctx, lockKey, a)
		return err
	})
	d.reload.NoAnswer(err)
	if pending != nil {
		if !a.Shared { // only a random owner is ever abandoned
			d.abandoned.Add(a.Owner, pending)
		}
		return backend.Grant{}, err // the abandoned call may still write r
	}
	return r, err
}

// acquireOnce is one call of the acquire script.
func (d *Driver) acquireOnce(ctx context.Context, lockKey string, a backend.Attempt) (backend.Grant, error) {
	// Optional arguments and keys are left out when not needed: each one
	// costs the server work on every call (see bench/README.md).
	queued := a.Waiter != ""
	keys := []string{lockKey}
	args := make([]any, 0, 6)
	args = append(args, a.Owner, a.TTL.Milliseconds())
	if keyTTL := d.keyTTL(a.TTL); keyTTL != redisproto.DefaultKeyTTLMs || queued {
		args = append(args, keyTTL)
	}
	queueKey := ""
	if queued {
		queueKey = redisproto.QueueOf(lockKey)
		keys = append(keys, queueKey)
		args = append(args, "", a.Waiter)
		if a.InQueue {
			args = append(args, "1")
		}
	}
	reply, err := redisproto.AcquireScript.Run(ctx, d.client, keys, args...).Result()
	if err != nil {
		return backend.Grant{}, err
	}
	n, tokenStr, err := redisproto.ParseAcquire(reply)
	if err != nil {
		return backend.Grant{}, err
	}
	return d.grant(n, tokenStr, lockKey, queueKey, a.TTL), nil
}

// grant reads the acquire script's {status, token, remaining ms}.
func (d *Driver) grant(n [3]int64, tokenStr, lockKey, queueKey string, lease time.Duration) backend.Grant {
	if n[0] == 0 {
		return backend.Grant{Status: backend.Held, Remaining: time.Duration(n[2]) * time.Millisecond}
	}
	status := backend.Acquired
	if n[0] == 2 {
		status = backend.Reentered
	}
	if tokenStr == "" {
		tokenStr = formatToken(n[1])
	}
	if queueKey == "" {
		queueKey = redisproto.QueueOf(lockKey)
	}
	return backend.Grant{Status: status, Token: n[1], Handle: newHold(lockKey, queueKey, tokenStr, lease)}
}

// Abandon frees key if owner holds it, whatever the count, after every
// acquire call of owner that was given up on ended: the clean-up of an
// attempt with a random owner. It runs the abandon script, which publishes
// the release when it frees the key. When ctx ends before such a call did,
// Abandon returns ctx.Err() and leaves the script to run once the call
// ended, in the background (Close waits for it): the call may yet grant the
// key to owner, and nobody else would free it before its lease ran out.
func (d *Driver) Abandon(ctx context.Context, key, owner string) error {
	lockKey, err := d.lockKey(key)
	if err != nil {
		return err
	}
	if done := d.abandoned.Done(owner); done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			d.run.Go(func() {
				<-done
				ctx, cancel := context.WithTimeout(context.Background(), redisrt.CleanupTimeout)
				defer cancel()
				_ = d.abandon(ctx, lockKey, owner)
			})
			return ctx.Err()
		}
	}
	return d.abandon(ctx, lockKey, owner)
}

func (d *Driver) abandon(ctx context.Context, lockKey, owner string) error {
	_, err := d.run.Call(ctx, func(ctx context.Context) error {
		return redisproto.AbandonScript.Run(ctx, d.client, []string{lockKey, redisproto.ChannelOf(lockKey)},
			owner, d.keyTTL(0), d.publish).Err()
	})
	d.reload.NoAnswer(err)
	return err
}
