package redisdriver

import (
	"context"
	"time"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
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
	lockKey, queueKey, err := d.lockKeys(a.Key)
	if err != nil {
		return backend.Grant{}, err
	}
	if a.Waiter != "" {
		d.noteWaiter(a.Waiter)
	}
	var g backend.Grant
	if d.run.Direct(ctx) { // no closure: the uncontended path allocates less
		g, err = d.acquireOnce(ctx, lockKey, queueKey, a)
		d.reload.NoAnswer(err)
		return g, err
	}
	var r backend.Grant
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		r, err = d.acquireOnce(ctx, lockKey, queueKey, a)
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

// acquireOnce is one call of the acquire script. The command is built in
// the handle a grant returns (hold.acquireCmd): one allocation for both.
func (d *Driver) acquireOnce(ctx context.Context, lockKey, queueKey string, a backend.Attempt) (backend.Grant, error) {
	// Optional arguments and keys are left out when not needed: each one
	// costs the server work on every call (see bench/README.md).
	queued := a.Waiter != ""
	nkeys := 1
	if queued {
		nkeys = 2
	}
	h := &hold{relKeys: [2]string{lockKey, queueKey}, lease: a.TTL, keyArg: lockKey}
	cmd := redisproto.AcquireCall.Args(h.acquireCmd[:0], nkeys)
	cmd = append(cmd, h.keyArg)
	if queued {
		cmd = append(cmd, queueKey)
	}
	cmd = append(cmd, a.Owner, a.TTL.Milliseconds())
	if keyTTL := d.keyTTL(a.TTL); keyTTL != redisproto.DefaultKeyTTLMs || queued {
		cmd = append(cmd, keyTTL)
	}
	if queued {
		cmd = append(cmd, "", a.Waiter)
		if a.InQueue {
			cmd = append(cmd, "1")
		}
	}
	reply, err := redisproto.AcquireCall.Run(ctx, d.client, cmd).Result()
	if err != nil {
		return backend.Grant{}, err
	}
	n, tokenStr, err := redisproto.ParseAcquire(reply)
	if err != nil {
		return backend.Grant{}, err
	}
	if n[0] == 0 {
		return held(n), nil
	}
	if _, ok := reply.(string); ok {
		h.tokenArg = reply // the token alone (ParseAcquire), boxed already
	}
	return granted(n, tokenStr, h), nil
}

// grant reads the acquire script's {status, token, remaining ms}.
func (d *Driver) grant(n [3]int64, tokenStr, lockKey, queueKey string, lease time.Duration) backend.Grant {
	if n[0] == 0 {
		return held(n)
	}
	if queueKey == "" {
		queueKey = redisproto.QueueOf(lockKey)
	}
	return granted(n, tokenStr, newHold(lockKey, queueKey, "", lease))
}

// held is the Grant of a reply that found the lock held.
func held(n [3]int64) backend.Grant {
	return backend.Grant{Status: backend.Held, Remaining: time.Duration(n[2]) * time.Millisecond}
}

// granted is the Grant of a reply that acquired or re-entered the lock,
// with h (its keys and lease set) as the handle.
func granted(n [3]int64, tokenStr string, h *hold) backend.Grant {
	status := backend.Acquired
	if n[0] == 2 {
		status = backend.Reentered
	}
	if tokenStr == "" {
		tokenStr = formatToken(n[1])
	}
	h.tokenStr = tokenStr
	return backend.Grant{Status: status, Token: n[1], Handle: h}
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
