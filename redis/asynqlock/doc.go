// Package asynqlock makes asynq handlers run one at a time per key,
// cluster-wide.
//
// asynq's Unique and TaskID deduplicate enqueues; they do not stop two
// workers from processing tasks for the same account at once, and asynq's own
// lease lets a long handler run twice. This middleware takes a redfence lock
// per key around the handler, locker being a *mutex.Locker:
//
//	mw, err := asynqlock.New(locker, asynqlock.WithKey(func(t *asynq.Task) (string, error) {
//		return accountID(t.Payload())
//	}))
//	if err != nil { ... }             // bad configuration is reported here
//	mux := asynq.NewServeMux()
//	mux.Use(mw)
//	srv := asynq.NewServer(redisOpt, asynqlock.Config(asynq.Config{Concurrency: 10}))
//
// docs/asynqlock.md explains busy keys and their retries, several keys, the
// busy record and the telemetry.
//
// # Guarantees
//
//   - Keys: the lock is taken on KeyPrefix and the key WithKey returns
//     ("asynq:" + accountID; by default DefaultKey, the task type and a hash
//     of its payload, so identical tasks never run at once). That is the key
//     redfence inspect and every span show. Tasks on every server sharing
//     the Locker's store exclude each other per key; WithLimit(n) lets n run
//     at once per key instead, on a mutex.Semaphore.
//   - While the handler runs, the lock auto-renews (WithTTL). The handler's
//     ctx is the lock's context joined with asynq's (its cancellation and
//     deadline): it ends with cause mutex.ErrLockLost when the lock is lost.
//     Token(ctx) is the lock's fencing token, to pass to package fenced.
//   - The lock is released when the handler returns, whatever it returns,
//     and when it panics (the panic goes on to asynq, which recovers it).
//   - Several keys (WithKeys): the handler runs only while it holds every
//     one, taken with mutex's LockAll (TryLockAll without WithWait) in one
//     order all Lockers share, so tasks naming the same keys in opposite
//     orders never deadlock; a task that finds one busy holds none when it
//     returns ErrLocked. KeyToken(ctx, key) gives each key's token; the ctx
//     ends when any key is lost.
//   - A busy key: by default the task returns at once an error wrapping
//     ErrLocked, and asynq retries it; Config makes that cheap (IsFailure
//     does not count it as a failure, RetryDelayFunc re-queues it soon).
//     WithWait makes the handler wait for the lock instead, up to a bound,
//     holding its worker slot.
//   - Busy(ctx, locker, key) counts the tasks that found key locked within
//     BusyWindow, on a Locker whose backend lends a Redis client
//     (redisdriver.ClientOf); one over Redlock or etcd keeps no record.
//
// # Errors
//
//	situation                                          error
//	nil locker, bad option (New); WithLimit with       ErrInvalid (mutex.ErrInvalid)
//	  WithKeys, or over a Locker without semaphores
//	Busy: nil ctx or locker, a backend lending no      ErrInvalid
//	  Redis client (Redlock, etcd), empty key
//	the key is held by another handler                 wraps ErrLocked: retried, not a failure
//	Redis unreachable or not answering                 wraps mutex.ErrUnavailable: a failure asynq
//	                                                     counts and retries with its back-off
//	WithKey's (WithKeys') function fails               that error, wrapped: a failure
//	no keys, an empty key, a key over mutex.MaxKeyLen  wraps ErrInvalid, naming the task type:
//	  with its "asynq:" prefix, over mutex.MaxKeys keys  a failure
//	the handler's error                                returned as it is
//
// Limits: WithTTL from mutex.MinTTL to mutex.MaxTTL; WithWait at least 0;
// WithLimit from 1 to mutex.MaxLimit.
package asynqlock
