package idempotency

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/internal/bounded"
	"github.com/redfence/redfence/redis/redisfence"
)

// The Redis calls of a request, in the order it makes them. Each is bounded
// by WithStoreTimeout; those before the handler by the request's deadline
// too. A record's key carries its fence's hash tag (redisfence.Tag), so a
// fenced write of it is one MULTI/EXEC on a Cluster as well.

// LockPrefix begins the key of every lock the middleware takes, before the
// record's id; `redfence inspect` names it so.
const LockPrefix = "idempotency:"

func (h *handler) recordKey(id string) string { return h.cfg.prefix + redisfence.Tag(id) }

// within runs fn bounded by WithStoreTimeout, and returns by its deadline
// whatever the client (redis/internal/bounded); cmd says fn is a command of the
// client's own, which a client without ContextTimeoutEnabled would not end
// by the deadline (a Locker's calls do). extra is added for a large write.
func (h *handler) within(ctx context.Context, extra time.Duration, cmd bool, fn func(ctx context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, h.cfg.storeTimeout+extra)
	defer cancel()
	if !cmd {
		return fn(cctx)
	}
	return bounded.Call(cctx, h.aware, &h.calls, fn)
}

// setAllowance is the time a write of n bytes is given beyond the Redis
// timeout, 1 ms for every 64 KiB begun, so that a large body on a slow link
// does not pass for an outage.
func setAllowance(n int) time.Duration {
	return time.Duration((n+64<<10-1)/(64<<10)) * time.Millisecond
}

// openScript returns the record at KEYS[1], or creates it (ARGV[1], for
// ARGV[2] ms) and returns false. SET NX GET does the same on Redis 7.0 and
// later only; the script runs on every version the Locker supports.
var openScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false`)

// open reads the key's record, creating it (processing, with fp) when there
// is none, in one step: the first request's fingerprint is there before
// any handler runs, so that a different payload is told 422 while the
// first is processing. It returns nil when it created the record.
func (h *handler) open(ctx context.Context, id, fp string) (*record, error) {
	var old string
	err := h.within(ctx, 0, true, func(ctx context.Context) error {
		v, err := openScript.Run(ctx, h.client, []string{h.recordKey(id)},
			(&record{State: stateProcessing, FP: fp}).encode(), h.cfg.expiry.Milliseconds()).Text()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		old = v // read only on success: never after an abandoned call
		return err
	})
	if err != nil || old == "" {
		return nil, err
	}
	return decode([]byte(old))
}

// tryLock takes the key's lock, renewed while it is held, or returns nil
// when another request holds it. An error is an outage, never contention.
func (h *handler) tryLock(ctx context.Context, id string) (*mutex.Lock, error) {
	var lk *mutex.Lock
	err := h.within(ctx, 0, false, func(ctx context.Context) error {
		var err error
		lk, err = h.locker.TryLock(ctx, LockPrefix+id, mutex.WithTTL(h.cfg.ttl))
		if errors.Is(err, mutex.ErrNotAcquired) && !errors.Is(err, mutex.ErrUnavailable) && ctx.Err() == nil {
			return nil
		}
		return err
	})
	return lk, err
}

// take claims the record for the lock's holder before its handler runs:
// through the fence with the lock's token, so that from now on a holder
// before it (stalled past its lease) has its result refused. It returns
// the record instead when a handler finished meanwhile (its holder
// completed and unlocked between open and tryLock) or another first
// request's record replaced an expired one.
func (h *handler) take(ctx context.Context, id, fp string, token int64) (*record, error) {
	key := h.recordKey(id)
	var found *record
	err := h.within(ctx, 0, true, func(ctx context.Context) error {
		return h.fence.Do(ctx, id, token, []string{key}, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			found = nil // Do may run fn again
			b, err := tx.Get(ctx, key).Bytes()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if rec, err := decode(b); err == nil && (rec.State != stateProcessing || rec.FP != fp) {
				found = rec
				return nil
			}
			pipe.Set(ctx, key, (&record{State: stateProcessing, FP: fp}).encode(), h.cfg.expiry)
			return nil
		})
	})
	return found, err
}

// complete writes the handler's outcome through the fence with the lock's
// token: rec, or nothing at all (the record deleted: the key released)
// when rec is nil. A token lower than one the fence holds, a retry's that
// took over after this request stalled past its lease, is refused
// (redisfence.ErrStaleToken) and nothing is written. It runs after the
// handler, detached from the request: the outcome is stored even when the
// client has gone.
func (h *handler) complete(ctx context.Context, id string, token int64, rec *record) error {
	key := h.recordKey(id)
	var b []byte
	if rec != nil {
		b = rec.encode()
	}
	return h.within(ctx, setAllowance(len(b)), true, func(ctx context.Context) error {
		return h.fence.Do(ctx, id, token, nil, func(ctx context.Context, _ *redis.Tx, pipe redis.Pipeliner) error {
			if rec == nil {
				pipe.Del(ctx, key)
			} else {
				pipe.Set(ctx, key, b, h.cfg.expiry)
			}
			return nil
		})
	})
}

// load reads the key's record; nil when there is none.
func (h *handler) load(ctx context.Context, id string) (*record, error) {
	var b []byte
	err := h.within(ctx, 0, true, func(ctx context.Context) error {
		v, err := h.client.Get(ctx, h.recordKey(id)).Bytes()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		b = v
		return err
	})
	if err != nil || b == nil {
		return nil, err
	}
	return decode(b)
}

// unlock releases lk, and reports false when it was no longer held
// (ErrNotHeld: lost, or its lease deadline passed): a retry may have taken
// it. Any other failure leaves the lock to its lease, which had not run out.
func (h *handler) unlock(ctx context.Context, lk *mutex.Lock) bool {
	err := h.within(ctx, 0, false, func(ctx context.Context) error { return lk.Release(ctx) })
	if errors.Is(err, mutex.ErrNotHeld) {
		return false
	}
	h.tel.recordError(ctx, err)
	return true
}
