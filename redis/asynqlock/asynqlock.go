package asynqlock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
)

var (
	// ErrLocked is wrapped by the error a task returns when another handler
	// holds its key. Config's IsFailure does not count it as a failure.
	ErrLocked = errors.New("asynqlock: key is locked by another handler")
	// ErrInvalid is matched by New's and Busy's errors for bad input; it is
	// mutex.ErrInvalid, so one errors.Is check serves every package.
	ErrInvalid = mutex.ErrInvalid
)

// An Option configures the middleware. Nil options are ignored.
type Option interface{ apply(*config) }

type optionFunc func(*config)

func (f optionFunc) apply(c *config) { f(c) }

type config struct {
	keys  func(*asynq.Task) ([]string, error)
	multi bool // WithKeys was the last of WithKey and WithKeys
	limit int  // WithLimit: handlers per key; 0: one, under a lock
	ttl   time.Duration
	wait  time.Duration
	tp    trace.TracerProvider
	mp    metric.MeterProvider
	errs  []error
}

// KeyPrefix begins every lock the middleware takes: WithKey's "account:99"
// is locked as "asynq:account:99", the key admin's Inspect, the redfence
// command and every span show (redfence.key), so that the middleware's
// locks never meet the program's own on the same Locker.
const KeyPrefix = "asynq:"

// WithKey sets the lock key of a task, for example an account id from its
// payload; the lock taken is KeyPrefix followed by it ("asynq:account:99":
// look for that with redfence inspect). An error from fn fails the task
// with that error (asynq retries it, and counts it). Default: the task type
// and a hash of the payload, so identical tasks never run at once.
func WithKey(fn func(t *asynq.Task) (string, error)) Option {
	return optionFunc(func(c *config) {
		if fn == nil {
			c.errs = append(c.errs, errors.New("nil key function"))
			return
		}
		c.keys, c.multi = oneKey(fn), false
	})
}

// WithKeys sets several lock keys for a task, for example both accounts of
// a transfer: the handler runs only while it holds every one of them,
// taken with mutex's LockAll (TryLockAll without WithWait), so two tasks
// naming the same accounts in opposite orders never deadlock. Each key is
// locked as KeyPrefix followed by it; duplicates count once. When any key
// is busy the task returns ErrLocked, as for one busy key, holding none.
// No keys, an empty key or more than mutex.MaxKeys fails the task. The
// last of WithKey and WithKeys given wins.
func WithKeys(fn func(t *asynq.Task) ([]string, error)) Option {
	return optionFunc(func(c *config) {
		if fn == nil {
			c.errs = append(c.errs, errors.New("nil keys function"))
			return
		}
		c.keys, c.multi = fn, true
	})
}

// WithLimit lets up to n handlers run at once per key, for example at most
// 3 tasks of one tenant, instead of one: each takes a permit of the key's
// semaphore (mutex.Semaphore, named KeyPrefix followed by the key), with
// its lease (WithTTL), its loss context and its fencing token (Token).
// When all n are taken the task returns ErrLocked, as for a busy lock
// (WithWait: after waiting for a permit). The limit is stored in Redis by
// the first permit granted and the stored one applies: a changed n takes
// effect once the key's semaphore has been idle for the driver's
// WithFenceTTL (redisdriver.WithFenceTTL), or at once through
// mutex.Semaphore.SetLimit. New refuses n
// below 1 or above mutex.MaxLimit, WithKeys with it, and a Locker without
// semaphores (Redlock).
func WithLimit(n int) Option {
	return optionFunc(func(c *config) {
		if n < 1 || n > mutex.MaxLimit {
			c.errs = append(c.errs, fmt.Errorf("limit %d outside 1..%d", n, mutex.MaxLimit))
		}
		c.limit = n
	})
}

func oneKey(fn func(*asynq.Task) (string, error)) func(*asynq.Task) ([]string, error) {
	return func(t *asynq.Task) ([]string, error) {
		k, err := fn(t)
		return []string{k}, err
	}
}

// WithTTL sets the lock's lease, renewed every third of it while the handler
// runs. It bounds how long a crashed worker keeps its key. Default 30 s;
// from mutex.MinTTL to mutex.MaxTTL.
func WithTTL(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < mutex.MinTTL || d > mutex.MaxTTL {
			c.errs = append(c.errs, fmt.Errorf("TTL %v outside %v..%v", d, mutex.MinTTL, mutex.MaxTTL))
		}
		c.ttl = d
	})
}

// WithWait makes a task whose key is busy wait for it up to d inside the
// handler (holding its worker slot) before returning ErrLocked. Default 0:
// return at once.
func WithWait(d time.Duration) Option {
	return optionFunc(func(c *config) {
		if d < 0 {
			c.errs = append(c.errs, fmt.Errorf("negative wait %v", d))
		}
		c.wait = d
	})
}

// WithTracerProvider sets where spans go. Default, and for nil (a typed nil
// such as a nil *sdktrace.TracerProvider included): the global provider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return optionFunc(func(c *config) { c.tp = tp })
}

// WithMeterProvider sets where metrics go. Default, and for nil (typed or
// not): the global provider.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return optionFunc(func(c *config) { c.mp = mp })
}

// DefaultKey is the default lock key: the task type and a hash of its payload.
func DefaultKey(t *asynq.Task) (string, error) {
	sum := sha256.Sum256(t.Payload())
	return t.Type() + ":" + hex.EncodeToString(sum[:16]), nil
}

// New returns middleware that runs at most one handler per key at a time
// (WithLimit: n) across every server sharing locker's store. A nil locker
// or a bad option is reported here, wrapping ErrInvalid. Busy tasks are
// recorded (see Busy) when the Locker's backend lends a Redis client
// (redisdriver.ClientOf); over Redlock or etcd none is kept.
func New(locker *mutex.Locker, opts ...Option) (asynq.MiddlewareFunc, error) {
	c, err := newConfig(locker, opts)
	if err != nil {
		return nil, err
	}
	tel := newTelemetry(c.tp, c.mp)
	rc := redisdriver.ClientOf(locker.Backend()) // nil (Redlock): no busy records
	return func(next asynq.Handler) asynq.Handler {
		return asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) (err error) {
			ctx, span := tel.start(ctx, t.Type())
			outcome := "error" // also when the handler panics
			defer func() { tel.end(ctx, span, t.Type(), outcome, err) }()
			keys, err := taskKeys(c.keys, t)
			if err != nil {
				return err
			}
			setKeys(span, keys)

			start := time.Now()
			h, err := acquire(ctx, locker, keys, &c)
			if err != nil {
				// Busy only when other holders stood in the way: an
				// outage (mutex.ErrUnavailable) is a failure asynq counts.
				if errors.Is(err, mutex.ErrNotAcquired) && !errors.Is(err, mutex.ErrUnavailable) && ctx.Err() == nil {
					outcome = "locked"
					tel.lockWait(ctx, span, t.Type(), "locked", time.Since(start))
					n, berr := recordBusyAll(ctx, rc, keys, t)
					tel.busy(span, n, berr)
					return lockedError(keys, err)
				}
				tel.lockWait(ctx, span, t.Type(), "error", time.Since(start))
				return fmt.Errorf("asynqlock: lock %s: %w", strings.Join(prefixed(keys), ", "), err)
			}
			tel.lockWait(ctx, span, t.Type(), "acquired", time.Since(start))
			setTokens(span, h)
			defer func() {
				// Released whatever the handler did, a panic included; on a
				// context of its own, since asynq's may have ended.
				uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				defer cancel()
				_ = h.Release(uctx) // ErrNotHeld after a loss: nothing to release
			}()

			hctx, cancel := handlerContext(ctx, h)
			defer cancel()
			err = next.ProcessTask(hctx, t)
			switch {
			case errors.Is(context.Cause(h.Context()), mutex.ErrLockLost):
				outcome = "lock_lost"
			case err == nil:
				outcome = "ok"
			}
			return err
		})
	}, nil
}

// newConfig applies opts and refuses a bad configuration or locker,
// wrapping ErrInvalid.
func newConfig(locker *mutex.Locker, opts []Option) (config, error) {
	c := config{keys: oneKey(DefaultKey), ttl: 30 * time.Second}
	for _, o := range opts {
		if o != nil {
			o.apply(&c)
		}
	}
	switch {
	case locker == nil:
		return c, fmt.Errorf("asynqlock: %w: nil locker", ErrInvalid)
	case len(c.errs) > 0:
		return c, fmt.Errorf("asynqlock: %w: %w", ErrInvalid, errors.Join(c.errs...))
	case c.limit > 0 && c.multi:
		return c, fmt.Errorf("asynqlock: %w: WithLimit applies to one key per task (WithKey), not WithKeys", ErrInvalid)
	}
	if c.limit > 0 { // a Locker without semaphores (Redlock) is refused here, not per task
		if _, err := mutex.NewSemaphore(locker, KeyPrefix+"limit", c.limit); err != nil {
			return c, fmt.Errorf("asynqlock: %w: WithLimit: %w", ErrInvalid, err)
		}
	}
	return c, nil
}

type tokenKey struct{}

// Token returns the fencing token of the lock the handler runs under, when
// the task has one key. Under several keys (WithKeys) it returns false: ask
// KeyToken for each.
func Token(ctx context.Context) (int64, bool) {
	h, ok := ctx.Value(tokenKey{}).(*held)
	if !ok || len(h.keys) != 1 {
		return 0, false
	}
	return h.token(h.keys[0]), true
}

// KeyToken returns the fencing token of key (as WithKey or WithKeys
// returned it, without KeyPrefix) in the handler's ctx, for example one
// fenced.Claim per account of a transfer; false when the handler does not
// hold key.
func KeyToken(ctx context.Context, key string) (int64, bool) {
	h, ok := ctx.Value(tokenKey{}).(*held)
	if !ok || !slices.Contains(h.keys, key) {
		return 0, false
	}
	return h.token(key), true
}

// handlerContext is the lock's context joined with asynq's (ended by either,
// bounded by asynq's deadline), carrying the tokens.
func handlerContext(ctx context.Context, h *held) (context.Context, context.CancelFunc) {
	hctx, cancel := h.Join(ctx)
	return context.WithValue(hctx, tokenKey{}, h), cancel
}

// IsFailure is asynq's default (every error is a failure) except for
// ErrLocked: a busy key is retried without using up a retry or counting in
// the queue's failure stats.
func IsFailure(err error) bool {
	return err != nil && !errors.Is(err, ErrLocked)
}

// RetryDelayFunc re-queues a task that found its key busy after 100–300 ms
// (jittered) and asks fallback (asynq.DefaultRetryDelayFunc when nil) for
// everything else. asynq forwards retry tasks only every
// DelayedTaskCheckInterval, which bounds how soon the task runs again.
func RetryDelayFunc(fallback asynq.RetryDelayFunc) asynq.RetryDelayFunc {
	if fallback == nil {
		fallback = asynq.DefaultRetryDelayFunc
	}
	return func(n int, err error, t *asynq.Task) time.Duration {
		if errors.Is(err, ErrLocked) {
			return 100*time.Millisecond + rand.N(200*time.Millisecond)
		}
		return fallback(n, err, t)
	}
}

// Config returns cfg with what the middleware needs of the server: IsFailure
// and RetryDelayFunc that treat ErrLocked as contention (wrapping cfg's own,
// if set), and DelayedTaskCheckInterval 1 s when unset, so that a task
// retried after contention waits less than asynq's default check.
func Config(cfg asynq.Config) asynq.Config {
	if own := cfg.IsFailure; own != nil {
		cfg.IsFailure = func(err error) bool { return !errors.Is(err, ErrLocked) && own(err) }
	} else {
		cfg.IsFailure = IsFailure
	}
	cfg.RetryDelayFunc = RetryDelayFunc(cfg.RetryDelayFunc)
	if cfg.DelayedTaskCheckInterval == 0 {
		cfg.DelayedTaskCheckInterval = time.Second
	}
	return cfg
}
