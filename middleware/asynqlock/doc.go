// Package asynqlock makes asynq handlers run one at a time per key,
// cluster-wide.
//
// asynq's Unique and TaskID deduplicate enqueues; they do not stop two
// workers from processing tasks for the same account at once, and asynq's own
// lease lets a long handler run twice (asynq #1030). This middleware takes a
// redfence lock per key around the handler:
//
//	d, err := redisdriver.New(redisClient)
//	...
//	locker, err := mutex.New(d)
//	...
//	mw, err := asynqlock.New(locker, asynqlock.WithKey(func(t *asynq.Task) (string, error) {
//		return accountID(t.Payload())
//	}))
//	mux := asynq.NewServeMux()
//	mux.Use(mw)
//	srv := asynq.NewServer(redisOpt, asynqlock.Config(asynq.Config{Concurrency: 10}))
//
// The lock is taken on KeyPrefix and the key ("asynq:" + accountID):
// that is the key to look for with the redfence command (redfence inspect
// asynq:account:99) and in spans. While the handler runs, the lock
// auto-renews. The handler's ctx is the
// lock's context, also ended by asynq's own cancellation and deadline: it ends
// with mutex.ErrLockLost when the lock is lost, and Token(ctx) is the lock's
// fencing token, to pass to fenced. The lock is released when the handler
// returns, whatever it returns, and when it panics (the panic goes on to
// asynq, which recovers it).
//
// # Several keys
//
// A task that touches several resources, a transfer between two accounts,
// names them all with WithKeys: the handler runs only while it holds every
// one, taken with mutex's LockAll (TryLockAll without WithWait) in one
// order that all Lockers share, so tasks naming the same accounts in
// opposite orders never deadlock, and a task that finds one key busy holds
// none of them when it returns ErrLocked. KeyToken(ctx, key) gives each
// key's fencing token, one fenced.Claim per account for fenced's DoAll; the
// handler's ctx ends when any key is lost. A busy task is recorded under
// each of its keys, so Busy(key) counts the tasks retrying that need key.
// A one-key task keeps Lock's path and spans.
//
// # A busy key
//
// By default a task whose key is locked returns at once an error wrapping
// ErrLocked, and asynq retries it. Config fills in the server settings that
// make that cheap: IsFailure (ErrLocked is not a failure: the retry count is
// not used up and the queue's failure stats are untouched), a RetryDelayFunc
// that re-queues a busy key after 100–300 ms with jitter, and a
// DelayedTaskCheckInterval of 1 s. asynq moves retry tasks back to pending
// only at that interval (5 s unless set), so a busy key is retried after
// about that long whatever the delay says. WithWait makes the handler wait
// for the lock instead, up to a bound, holding its worker slot meanwhile.
//
// Tasks retried on a busy key do not wait in the lock's queue, so Inspect
// and the redfence command do not list them as waiters. The middleware
// notes each in a record beside the lock instead, in the same Redis, and
// Busy counts them: the tasks that found the key locked within the last
// BusyWindow, each once however often it was retried (on a Locker of one
// deployment; a Redlock Locker keeps none). It costs one round trip per
// busy task, none otherwise. The record needs the Redis client the
// Locker's backend lends (redisdriver.ClientOf); a Locker over Redlock or
// etcd keeps none, and Busy refuses it.
//
// # Telemetry
//
// Spans and instruments come from WithTracerProvider and WithMeterProvider
// (default: otel's globals), under the instrumentation scope
// "github.com/redfence/redfence/middleware/asynqlock" with the module's version.
// The Locker's own spans and instruments are package mutex's, configured on
// the Locker.
//
//	span                 kind      attributes
//	redfence.asynqlock   INTERNAL  asynq.task.type, redfence.key (the lock's, with KeyPrefix, as
//	                                 mutex's spans say it), redfence.wait (seconds to get the lock
//	                                 or give up, float), redfence.token (when locked),
//	                                 for several keys redfence.keys (how many),
//	                                 redfence.asynqlock.keys and redfence.asynqlock.tokens
//	                                 (in the same order) instead of redfence.key and redfence.token,
//	                                 redfence.asynqlock.busy (on a busy key: the tasks retrying on
//	                                 it, as Busy counts them), redfence.outcome (ok, locked,
//	                                 lock_lost, error); one span per task, around the handler;
//	                                 status Error on errors but ErrLocked
//
// The handler's work is traced under this span: mutex's redfence.TryLock
// (or Lock) is a child of it, and so is every span started on the
// handler's ctx (fenced.Do's, say), while the task's span is still live.
//
//	instrument                 kind       unit    attributes
//	redfence.asynqlock.tasks   counter    {task}  asynq.task.type, redfence.outcome (ok, locked,
//	                                                lock_lost, error)
//	redfence.asynqlock.wait    histogram  s       asynq.task.type, redfence.outcome (acquired,
//	                                                locked, error): the time to get the lock or
//	                                                give up
//
// A panicking handler counts as error. Metrics carry the task type, never
// the key, so their cardinality stays bounded.
//
// # Errors
//
//	situation                                          error
//	nil locker, bad option (New)                       ErrInvalid (mutex.ErrInvalid)
//	Busy: nil ctx or locker, a backend lending no      ErrInvalid
//	  Redis client (Redlock, etcd), empty key
//	the key is held by another handler                 wraps ErrLocked: retried, not a failure
//	Redis unreachable or not answering                 wraps mutex.ErrUnavailable: a failure asynq
//	                                                     counts and retries with its back-off
//	WithKey's (WithKeys') function fails, no keys,     that error (wrapping mutex.ErrInvalid for
//	  an empty key, a key over mutex.MaxKeyLen with      the key): a failure
//	  its "asynq:" prefix, over mutex.MaxKeys keys
//	the handler's error                                returned as it is
//
// Limits: WithTTL from mutex.MinTTL to mutex.MaxTTL; WithWait at least 0.
package asynqlock
