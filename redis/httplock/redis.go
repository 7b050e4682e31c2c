package httplock

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/internal/bounded"
)

// The Redis calls made for a request. Each has its own bound, and a failure
// of any marks Redis down (health.go).

// call makes one Redis call for a request, bounded by WithStoreTimeout
// whatever is left of the request's wait. fn returns nil for the answers
// that are expected (a miss, a lock held by another). Any other error means
// Redis cannot be relied on: it is marked down, so that the requests after
// this one do not call it, and the error is recorded on the request's span.
// fn must end by its ctx's deadline on any client: a Locker's call or a
// subscription does; a command of the client's goes through command.
func (h *handler) call(ctx context.Context, fn func(ctx context.Context) error) error {
	return h.callWithin(ctx, h.cfg.storeTimeout, false, fn)
}

// command is call for a command of the client's own (GET, PUBLISH), which
// a client that does not apply ctx deadlines to its sockets does not end by
// them (see bounded).
func (h *handler) command(ctx context.Context, fn func(ctx context.Context) error) error {
	return h.callWithin(ctx, h.cfg.storeTimeout, true, fn)
}

// callWithin is call with its own bound, for a call whose time grows with
// what it sends (see setAllowance); cmd says fn is a command of the
// client's own.
func (h *handler) callWithin(ctx context.Context, timeout time.Duration, cmd bool, fn func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	if cmd {
		err = h.bounded(cctx, fn)
	} else {
		err = fn(cctx)
	}
	if err != nil {
		h.health.fail()
		h.tel.recordError(ctx, err)
	}
	return err
}

// bounded runs fn and returns by ctx's deadline, with go-redis's default
// client too (redis/internal/bounded). The request's error marks Redis down, so
// that those after it make no call: goroutines it stops waiting for exist
// only for the calls in flight when Redis stopped answering.
func (h *handler) bounded(ctx context.Context, fn func(ctx context.Context) error) error {
	return bounded.Call(ctx, h.ctxAware, &h.health.calls, fn)
}

// setAllowance is the time a SET of n bytes is given beyond the Redis
// timeout, 1 ms for every 64 KiB begun, so that a large body on a slow link
// does not pass for an outage and mark Redis down.
func setAllowance(n int) time.Duration {
	return time.Duration((n+setChunk-1)/setChunk) * time.Millisecond
}

const setChunk = 64 << 10

// load returns the response shared for key, or nil when there is none (a
// corrupt one counts as none, and is recorded). An error means the call
// failed.
func (h *handler) load(ctx context.Context, key string) (*entry, error) {
	var b []byte
	err := h.command(ctx, func(ctx context.Context) error {
		v, err := h.client.Get(ctx, h.cfg.prefix+key).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		b = v // read only on success: never after an abandoned call
		return err
	})
	if err != nil || b == nil {
		return nil, err
	}
	e, err := decode(b)
	if err != nil {
		h.tel.recordError(ctx, err)
		return nil, nil
	}
	return e, nil
}

// tryLock takes key's lock, or returns nil when another request holds it.
// The lock's lease is WithTTL: a leader stalled past it lets the next
// one through. An error is an outage, never contention (mutex's
// ErrNotAcquired alone).
func (h *handler) tryLock(ctx context.Context, key string) (*mutex.Lock, error) {
	var lk *mutex.Lock
	err := h.call(ctx, func(ctx context.Context) error {
		var err error
		lk, err = h.locker.TryLock(ctx, lockKey(key), mutex.WithTTL(h.cfg.ttl), mutex.WithAutoRenew(false))
		if errors.Is(err, mutex.ErrNotAcquired) && !errors.Is(err, mutex.ErrUnavailable) && ctx.Err() == nil {
			return nil
		}
		return err
	})
	return lk, err
}

// lockKey is the Locker's key of a request key, as mutex's spans and the
// redfence command name it.
func lockKey(key string) string { return LockPrefix + key }

// unlock releases lk. ErrNotHeld, after a stall past the lease, leaves
// nothing to undo.
func (h *handler) unlock(ctx context.Context, lk *mutex.Lock) {
	_ = h.call(ctx, func(ctx context.Context) error {
		if err := lk.Release(ctx); !errors.Is(err, mutex.ErrNotHeld) {
			return err
		}
		return nil
	})
}

func (h *handler) channel(key string) string { return h.cfg.prefix + key + ":ready" }

// subscribe listens for the key's publications.
func (h *handler) subscribe(ctx context.Context, key string) (*redis.PubSub, error) {
	var ps *redis.PubSub
	err := h.call(ctx, func(ctx context.Context) error {
		if h.sharded {
			ps = h.client.SSubscribe(ctx, h.channel(key))
		} else {
			ps = h.client.Subscribe(ctx, h.channel(key))
		}
		if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
			_ = ps.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return ps, nil
}

func (h *handler) publish(ctx context.Context, key, msg string) error {
	return h.command(ctx, func(ctx context.Context) error {
		if h.sharded {
			return h.client.SPublish(ctx, h.channel(key), msg).Err()
		}
		return h.client.Publish(ctx, h.channel(key), msg).Err()
	})
}

// pollMin and pollMax bound the fallback poll while waiting for a leader.
const (
	pollMin = 100 * time.Millisecond
	pollMax = 200 * time.Millisecond
)

// awaitReady waits for a publication on ps for at most d, or until ctx ends,
// and returns it ("" for none). A broken subscription is noticed by the
// calls that follow.
func (h *handler) awaitReady(ctx context.Context, ps *redis.PubSub, d time.Duration) string {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < d {
		d = max(time.Until(dl), time.Millisecond)
	}
	msg, err := ps.ReceiveTimeout(ctx, d)
	if m, ok := msg.(*redis.Message); ok && err == nil {
		return m.Payload
	}
	return ""
}

// LockPrefix begins the key of every lock the middleware takes, before the
// request key's hash; `redfence inspect` names it so.
const LockPrefix = "httplock:"
