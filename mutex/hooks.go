package mutex

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/redfence/redfence/internal/mutexhooks"
)

// The tests of other modules see inside a Locker through internal/mutexhooks.
func init() {
	mutexhooks.WaitersOf = func(l any, key string) int { return hookWaitersOf(l.(*Locker), key) }
	mutexhooks.LockerIDOf = func(l any) string { return hookLockerIDOf(l.(*Locker)) }
	mutexhooks.RenewWakes = func(l any) int64 { return hookRenewWakes(l.(*Locker)) }
	mutexhooks.RenewAsleep = func(l any) time.Time { return hookRenewAsleep(l.(*Locker)) }
	mutexhooks.IsUnsetGlobal = func(tp any) bool { return hookIsUnsetGlobal(tp.(trace.TracerProvider)) }
	mutexhooks.StartsSpans = func(l any) bool { return hookStartsSpans(l.(*Locker)) }
	mutexhooks.OrderOf = func(l any, keys []string) []string { return hookOrderOf(l.(*Locker), keys) }
	mutexhooks.GroupOf = func(l any, key string) int { return hookGroupOf(l.(*Locker), key) }
	mutexhooks.SemaphoreSubscribed = func(l any, name string) bool { return hookSemaphoreSubscribed(l.(*Locker), name) }
	mutexhooks.SemaphoreWaiters = func(l any, name string) int { return hookSemaphoreWaiters(l.(*Locker), name) }
	mutexhooks.RWSubscribed = func(l any, name string) bool { return hookRWSubscribed(l.(*Locker), name) }
}

// hookWaitersOf is mutexhooks.WaitersOf.
func hookWaitersOf(l *Locker, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[key]
	if q == nil {
		return 0
	}
	return len(q.waiters)
}

// hookLockerIDOf is mutexhooks.LockerIDOf.
func hookLockerIDOf(l *Locker) string { return l.id }

// hookRenewWakes is mutexhooks.RenewWakes.
func hookRenewWakes(l *Locker) int64 { return l.renew.wakes.Load() }

// hookRenewAsleep is mutexhooks.RenewAsleep.
func hookRenewAsleep(l *Locker) time.Time {
	l.renew.mu.Lock()
	defer l.renew.mu.Unlock()
	return l.renew.asleep
}

// hookIsUnsetGlobal is mutexhooks.IsUnsetGlobal.
func hookIsUnsetGlobal(tp trace.TracerProvider) bool { return isUnsetGlobal(tp) }

// hookStartsSpans is mutexhooks.StartsSpans.
func hookStartsSpans(l *Locker) bool {
	_, span := l.tel.startSpan(context.Background(), "probe", "probe", 0)
	defer span.End()
	_, skipped := span.(noop.Span)
	return !skipped
}

// hookOrderOf is mutexhooks.OrderOf.
func hookOrderOf(l *Locker, keys []string) []string {
	var out []string
	for _, g := range l.order(keys) {
		out = append(out, g...)
	}
	return out
}

// hookGroupOf is mutexhooks.GroupOf.
func hookGroupOf(l *Locker, key string) int {
	if l.drv.ba == nil {
		return -1
	}
	return l.drv.ba.Group(key)
}

// hookSemaphoreSubscribed is mutexhooks.SemaphoreSubscribed.
func hookSemaphoreSubscribed(l *Locker, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[semQueueKey(name)]
	return q != nil && q.subscribed && q.unwatch != nil
}

// hookSemaphoreWaiters is mutexhooks.SemaphoreWaiters.
func hookSemaphoreWaiters(l *Locker, name string) int { return hookWaitersOf(l, semQueueKey(name)) }

// hookRWSubscribed is mutexhooks.RWSubscribed.
func hookRWSubscribed(l *Locker, name string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.queues[rwQueueKey(name)]
	return q != nil && q.subscribed && q.unwatch != nil
}
