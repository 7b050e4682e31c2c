package mutex

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// reloadEvery is the least time between two slot map reloads asked for by
// a Locker (noAnswer).
const reloadEvery = time.Second

// noAnswer notes a call that got no answer from Redis: a timeout, or a
// refused or broken connection, but not a reply, nor a caller's cancel. On
// Cluster it asks the client to reload its slot map, at most once every
// reloadEvery. go-redis reloads it on a MOVED reply, or at an interval of
// a minute; a master that hangs, or died, sends no MOVED, so after its
// replica took over every call would go on to it until then. The reload
// runs in the client (ReloadState), which coalesces those asked meanwhile.
func (l *Locker) noAnswer(err error) {
	if !l.cluster || !unanswered(err) {
		return
	}
	now := time.Now().UnixNano()
	last := l.reloaded.Load()
	if now-last < int64(reloadEvery) || !l.reloaded.CompareAndSwap(last, now) {
		return
	}
	if c, ok := l.client.(*redis.ClusterClient); ok {
		c.ReloadState(context.Background())
	}
}

// unanswered reports whether err says the server did not answer, rather
// than answered with an error or was not asked.
func unanswered(err error) bool {
	var rerr redis.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, redis.ErrClosed), errors.As(err, &rerr):
		return false
	}
	return true
}
