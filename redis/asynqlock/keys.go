package asynqlock

import (
	"context"
	"fmt"
	"strings"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex"
)

// held is what a handler runs under: one key's Lock (WithKey, as before
// WithKeys existed, so a one-key task's spans and wire calls are
// unchanged) or several keys' Locks.
type held struct {
	keys   []string // as the task named them, without KeyPrefix, deduplicated
	one    *mutex.Lock
	all    *mutex.Locks
	permit *mutex.Permit // WithLimit
}

func (h *held) Context() context.Context {
	if h.permit != nil {
		return h.permit.Context()
	}
	if h.one != nil {
		return h.one.Context()
	}
	return h.all.Context()
}

func (h *held) Join(ctx context.Context) (context.Context, context.CancelFunc) {
	if h.permit != nil {
		return h.permit.Join(ctx)
	}
	if h.one != nil {
		return h.one.Join(ctx)
	}
	return h.all.Join(ctx)
}

func (h *held) Release(ctx context.Context) error {
	if h.permit != nil {
		return h.permit.Release(ctx)
	}
	if h.one != nil {
		return h.one.Release(ctx)
	}
	return h.all.Release(ctx)
}

func (h *held) token(key string) int64 {
	if h.permit != nil {
		return h.permit.Token()
	}
	if h.one != nil {
		return h.one.Token()
	}
	return h.all.TokenOf(KeyPrefix + key)
}

// taskKeys asks fn for t's keys, refuses none or an empty one, and drops
// duplicates, keeping the first of each.
func taskKeys(fn func(*asynq.Task) ([]string, error), t *asynq.Task) ([]string, error) {
	keys, err := fn(t)
	switch {
	case err != nil:
		return nil, fmt.Errorf("asynqlock: key of %s task: %w", t.Type(), err)
	case len(keys) == 0:
		return nil, fmt.Errorf("asynqlock: %w: no keys for %s task", ErrInvalid, t.Type())
	}
	seen := make(map[string]bool, len(keys))
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == "" {
			return nil, fmt.Errorf("asynqlock: %w: empty key for %s task", ErrInvalid, t.Type())
		}
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out, nil
}

// acquire takes keys: Lock or TryLock for one, LockAll or TryLockAll for
// several; waiting up to c.wait when it is set.
func acquire(ctx context.Context, locker *mutex.Locker, keys []string, c *config) (*held, error) {
	if c.wait > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.wait)
		defer cancel()
	}
	ttl := mutex.WithTTL(c.ttl)
	h := &held{keys: keys}
	var err error
	switch {
	case c.limit > 0:
		h.permit, err = takePermit(ctx, locker, keys[0], c)
	case len(keys) == 1 && c.wait > 0:
		h.one, err = locker.Lock(ctx, KeyPrefix+keys[0], ttl)
	case len(keys) == 1:
		h.one, err = locker.TryLock(ctx, KeyPrefix+keys[0], ttl)
	case c.wait > 0:
		h.all, err = locker.LockAll(ctx, prefixed(keys), ttl)
	default:
		h.all, err = locker.TryLockAll(ctx, prefixed(keys), ttl)
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

// takePermit takes a permit of key's semaphore (WithLimit): TryAcquire, or
// Acquire within WithWait.
func takePermit(ctx context.Context, locker *mutex.Locker, key string, c *config) (*mutex.Permit, error) {
	s, err := mutex.NewSemaphore(locker, KeyPrefix+key, c.limit, mutex.WithTTL(c.ttl))
	if err != nil {
		return nil, err
	}
	if c.wait > 0 {
		return s.Acquire(ctx)
	}
	return s.TryAcquire(ctx)
}

func prefixed(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = KeyPrefix + k
	}
	return out
}

// lockedError is a busy task's error: ErrLocked, naming the key for one
// key, and mutex's error (which names the busy key) for several.
func lockedError(keys []string, err error) error {
	if len(keys) == 1 {
		return fmt.Errorf("%w: %s", ErrLocked, KeyPrefix+keys[0])
	}
	return fmt.Errorf("%w: %s: %v", ErrLocked, strings.Join(prefixed(keys), ", "), err)
}

// setKeys names the task's lock on its span: redfence.key for one key, as
// mutex's spans say it; for several, redfence.keys (how many, as mutex's
// LockAll span says it) and redfence.asynqlock.keys (the keys).
func setKeys(span trace.Span, keys []string) {
	if len(keys) == 1 {
		span.SetAttributes(attrKey.String(KeyPrefix + keys[0]))
		return
	}
	span.SetAttributes(attrKeys.Int(len(keys)), attrKeyList.StringSlice(prefixed(keys)))
}

// setTokens puts the tokens on the span, in the order of the keys.
func setTokens(span trace.Span, h *held) {
	if len(h.keys) == 1 {
		span.SetAttributes(attrToken.Int64(h.token(h.keys[0])))
		return
	}
	toks := make([]int64, len(h.keys))
	for i, k := range h.keys {
		toks[i] = h.token(k)
	}
	span.SetAttributes(attrTokenList.Int64Slice(toks))
}

// recordBusyAll notes the busy task under each of its keys: Busy(key)
// counts the tasks retrying that need key, alone or with others. The
// count returned is the largest; the first failure ends it.
func recordBusyAll(ctx context.Context, c redis.UniversalClient, keys []string, t *asynq.Task) (int, error) {
	most := -1
	for _, k := range keys {
		n, err := recordBusy(ctx, c, k, t)
		if err != nil {
			return most, err
		}
		most = max(most, n)
	}
	return most, nil
}
