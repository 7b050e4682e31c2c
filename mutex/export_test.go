package mutex

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// LockKeyOf is the Redis key of key under the Redis drivers' default
// prefix (redisproto.DefaultPrefix), which the tests' Lockers use unless
// they give the driver another.
func LockKeyOf(key string) string { return redisproto.LockKey(redisproto.DefaultPrefix, key) }

// ChannelOf exposes the release channel of a lock key to the tests.
func ChannelOf(lockKey string) string { return redisproto.ChannelOf(lockKey) }

// WaitersOf counts the goroutines of l queued for key.
func WaitersOf(l *Locker, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[key]
	if q == nil {
		return 0
	}
	return len(q.waiters)
}

// QueueOf exposes the key of the waiting-Lockers queue of a lock key.
func QueueOf(lockKey string) string { return redisproto.QueueOf(lockKey) }

// LockerIDOf is the id a Locker queues under in Redis.
func LockerIDOf(l *Locker) string { return l.id }

// RenewWakes counts the times an acquisition woke l's renewal loop.
func RenewWakes(l *Locker) int64 { return l.renew.wakes.Load() }

// RenewAsleep is when l's renewal loop plans to wake (zero while it works).
func RenewAsleep(l *Locker) time.Time {
	l.renew.mu.Lock()
	defer l.renew.mu.Unlock()
	return l.renew.asleep
}

// ParseAcquire exposes the reading of the acquire script's reply.
func ParseAcquire(reply any) ([3]int64, string, error) { return redisproto.ParseAcquire(reply) }

// IsUnsetGlobal reports whether tp is otel's default global TracerProvider.
func IsUnsetGlobal(tp trace.TracerProvider) bool { return isUnsetGlobal(tp) }

// StartsSpans reports whether l starts a span (recording or not) for a lock
// operation now.
func StartsSpans(l *Locker) bool {
	_, span := l.tel.startSpan(context.Background(), "probe", "probe", 0)
	defer span.End()
	_, skipped := span.(noop.Span)
	return !skipped
}

// AcquireSHA is the acquire script's SHA-1, for SCRIPT EXISTS.
func AcquireSHA() string { return redisproto.AcquireScript.Hash() }

// OrderOf is the order LockAll takes keys in, their groups flattened.
func OrderOf(l *Locker, keys []string) []string {
	var out []string
	for _, g := range l.order(keys) {
		out = append(out, g...)
	}
	return out
}

// GroupOf is key's group in l's backend (backend.Batcher), -1 without one.
func GroupOf(l *Locker, key string) int {
	if l.drv.ba == nil {
		return -1
	}
	return l.drv.ba.Group(key)
}

// SemaphoreSubscribed reports whether a goroutine of l waits for a permit
// of name, its attempts having found every permit held (the queue's
// release notifications are asked for).
func SemaphoreSubscribed(l *Locker, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[semQueueKey(name)]
	return q != nil && q.subscribed && q.unwatch != nil
}

// SemaphoreWaiters counts the goroutines of l queued for a permit of name.
func SemaphoreWaiters(l *Locker, name string) int { return WaitersOf(l, semQueueKey(name)) }

// RWSubscribed is SemaphoreSubscribed for the read-write lock of name.
func RWSubscribed(l *Locker, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[rwQueueKey(name)]
	return q != nil && q.subscribed && q.unwatch != nil
}
