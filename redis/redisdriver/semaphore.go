package redisdriver

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisinspect"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

// The Driver keeps semaphores (backend.Semaphorer) in three keys beside the
// lock of the same name, in its hash slot (redisproto.SemaphoreKeys), on the
// server's clock; lua/sem_acquire.lua has the layout. A semaphore's tokens
// are its own sequence, max(last + 1, server time in µs), the lock's scheme
// but not the lock's counter: a fence that takes tokens of both the lock and
// the semaphore of one name needs a resource name for each.

// AcquirePermit runs the acquire script once. An error leaves the outcome
// unknown; when the call was given up on, a ReleasePermit of a.Owner with
// token 0 waits for it to end first.
func (d *Driver) AcquirePermit(ctx context.Context, a backend.PermitAttempt) (backend.Grant, error) {
	keys, err := d.semKeys(a.Key)
	if err != nil {
		return backend.Grant{}, err
	}
	if a.Limit < 1 || a.TTL < time.Millisecond {
		return backend.Grant{}, invalid("permit attempt with limit %d and lease %v", a.Limit, a.TTL)
	}
	reply, err := d.attempt(ctx, a.Owner, redisproto.SemAcquireScript, keys[:3],
		a.Owner, a.TTL.Milliseconds(), a.Limit, d.keyTTL(a.TTL))
	if err != nil {
		return backend.Grant{}, err
	}
	return parsePermit(reply, 1)
}

// attempt runs an acquire script, a permit's or a read-write hold's, once.
// A call given up on is recorded under owner, so that a clean-up release
// of owner comes after it (releaseAfter).
func (d *Driver) attempt(ctx context.Context, owner string, script *redis.Script, keys []string, args ...any) (any, error) {
	var reply any
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		reply, err = script.Run(ctx, d.client, keys, args...).Result()
		return err
	})
	d.reload.NoAnswer(err)
	if pending != nil {
		d.abandoned.Add(owner, pending)
		return nil, err // the abandoned call may still write reply
	}
	return reply, err
}

// parsePermit reads sem_acquire.lua's (and rw_acquire.lua's) {1, token} or
// {0, ms}; a token below least is unexpected (a read's may be 0).
func parsePermit(reply any, least int64) (backend.Grant, error) {
	r, ok := reply.([]any)
	if !ok || len(r) != 2 {
		return backend.Grant{}, errUnexpectedPermit
	}
	status, ok := r[0].(int64)
	if !ok {
		return backend.Grant{}, errUnexpectedPermit
	}
	if status == 0 {
		ms, ok := r[1].(int64)
		if !ok {
			return backend.Grant{}, errUnexpectedPermit
		}
		return backend.Grant{Status: backend.Held, Remaining: time.Duration(ms) * time.Millisecond}, nil
	}
	s, _ := r[1].(string)
	tok, err := strconv.ParseInt(s, 10, 64)
	if err != nil || tok < least {
		return backend.Grant{}, errUnexpectedPermit
	}
	return backend.Grant{Status: backend.Acquired, Token: tok}, nil
}

// ReleasePermit runs the release script: true when p's permit was held.
// With p.Token 0 (a clean-up), it first waits for the acquire calls of
// p.Owner given up on; when ctx ends first it returns ctx.Err() and
// releases in the background once they ended (Close waits for that).
func (d *Driver) ReleasePermit(ctx context.Context, p backend.Lease) (bool, error) {
	keys, err := d.semKeys(p.Key)
	if err != nil {
		return false, err
	}
	return d.releaseAfter(ctx, p, func(ctx context.Context) (bool, error) { return d.releasePermit(ctx, keys, p) })
}

// releaseAfter runs release, a permit's or a read-write hold's, once the
// acquire calls of l.Owner given up on ended when l.Token is 0 (a
// clean-up): when ctx ends first, in the background on a context of its
// own (Close waits for it), returning ctx's error.
func (d *Driver) releaseAfter(ctx context.Context, l backend.Lease, release func(context.Context) (bool, error)) (bool, error) {
	if done := d.abandoned.Done(l.Owner); l.Token == 0 && done != nil {
		select {
		case <-done:
		case <-ctx.Done():
			d.run.Go(func() {
				<-done
				ctx, cancel := context.WithTimeout(context.Background(), redisrt.CleanupTimeout)
				defer cancel()
				_, _ = release(ctx)
			})
			return false, ctx.Err()
		}
	}
	return release(ctx)
}

func (d *Driver) releasePermit(ctx context.Context, keys []string, p backend.Lease) (bool, error) {
	var n int64
	_, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		n, err = redisproto.SemReleaseScript.Run(ctx, d.client, keys[:2], p.Owner,
			strconv.FormatInt(p.Token, 10), keys[3], d.publish).Int64()
		return err
	})
	d.reload.NoAnswer(err)
	if err != nil {
		return false, err // n may still be written by a call given up on
	}
	return n == 1, nil
}

// ExtendPermits sends the extensions in one pipelined round trip, as
// Extend does for locks.
func (d *Driver) ExtendPermits(ctx context.Context, permits []backend.Lease) ([]backend.Renewal, error) {
	if len(permits) == 0 {
		return nil, nil
	}
	calls := make([]redisproto.Call, len(permits))
	for i, p := range permits {
		keys, err := d.semKeys(p.Key)
		if err != nil {
			return nil, err
		}
		calls[i] = redisproto.Call{Keys: keys[:3], Args: []any{p.Owner, strconv.FormatInt(p.Token, 10), p.TTL.Milliseconds(), d.keyTTL(p.TTL)}}
	}
	return d.renew(ctx, redisproto.SemExtendScript, calls)
}

// SetLimit stores key's limit and wakes its watchers; a limit below 1 is
// bad input.
func (d *Driver) SetLimit(ctx context.Context, key string, limit int) error {
	keys, err := d.semKeys(key)
	if err != nil {
		return err
	}
	if limit < 1 {
		return invalid("semaphore limit %d is below 1", limit)
	}
	_, err = d.run.Call(ctx, func(ctx context.Context) error {
		return redisproto.SemLimitScript.Run(ctx, d.client, keys[:3], limit,
			d.keyTTL(0), keys[3], d.publish).Err()
	})
	d.reload.NoAnswer(err)
	return err
}

// InspectSemaphore runs the inspect script, read-only (EVALSHA_RO, so that
// it runs while the server holds writes): the limit and live holders.
func (d *Driver) InspectSemaphore(ctx context.Context, key string) (backend.SemaphoreState, error) {
	keys, err := d.semKeys(key)
	if err != nil {
		return backend.SemaphoreState{}, err
	}
	reply, err := d.inspectRO(ctx, redisproto.SemInspectScript, keys[:3])
	if err != nil {
		return backend.SemaphoreState{}, err
	}
	return redisinspect.ParseSemaphore(reply)
}

// inspectRO runs an inspect script once, read-only (EVALSHA_RO, so that it
// runs while the server holds writes).
func (d *Driver) inspectRO(ctx context.Context, script *redis.Script, keys []string) ([]any, error) {
	var reply []any
	_, err := d.run.Interruptible(ctx, func(ctx context.Context) error {
		cmds, err := redisproto.RunScriptsRO(ctx, d.client, script, []redisproto.Call{{Keys: keys}})
		if err != nil {
			return err
		}
		reply, err = cmds[0].Slice()
		return err
	})
	d.reload.NoAnswer(err)
	return reply, err
}

// WatchPermits subscribes to key's semaphore channel, as Watch does to its
// lock's.
func (d *Driver) WatchPermits(key string, wake func()) (ready <-chan struct{}, stop func()) {
	lockKey, err := d.lockKey(key)
	if err != nil {
		return make(chan struct{}), func() {}
	}
	return d.subs.Watch(redisproto.SemaphoreChannelOf(lockKey), wake)
}

// semKeys are the keys of key's semaphore and, last, its channel (not a
// key: the scripts take it as an argument).
func (d *Driver) semKeys(key string) ([]string, error) {
	lockKey, err := d.lockKey(key)
	if err != nil {
		return nil, err
	}
	return append(redisproto.SemaphoreKeys(lockKey), redisproto.SemaphoreChannelOf(lockKey)), nil
}

var errUnexpectedPermit = errors.New("mutex: unexpected reply from a semaphore script")
