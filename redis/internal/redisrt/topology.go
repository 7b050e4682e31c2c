package redisrt

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// reloadEvery is the least time between two slot map reloads a Reloader
// asks for.
const reloadEvery = time.Second

// Reloader asks a Cluster client to reload its slot map when a call got no
// answer. go-redis reloads it on a MOVED reply, or at an interval of a
// minute; a master that hangs, or died, sends no MOVED, so after its
// replica took over every call would go on to it until then. It is safe
// for concurrent use; a nil Reloader, or one over a client that is not a
// *redis.ClusterClient, does nothing.
type Reloader struct {
	c        *redis.ClusterClient
	reloaded atomic.Int64 // when NoAnswer last asked for a reload, Unix ns
}

// NewReloader returns a Reloader for c.
func NewReloader(c redis.UniversalClient) *Reloader {
	cc, _ := c.(*redis.ClusterClient)
	return &Reloader{c: cc}
}

// NoAnswer notes a call's error. When the server did not answer
// (Unanswered), it asks the client to reload its slot map, at most once
// every second. The reload runs in the client (ReloadState), which
// coalesces those asked meanwhile; NoAnswer never blocks.
func (r *Reloader) NoAnswer(err error) {
	if r == nil || r.c == nil || !Unanswered(err) {
		return
	}
	now := time.Now().UnixNano()
	last := r.reloaded.Load()
	if now-last < int64(reloadEvery) || !r.reloaded.CompareAndSwap(last, now) {
		return
	}
	r.c.ReloadState(context.Background())
}

// Unanswered reports whether err says the server did not answer (a
// timeout, a refused or broken connection), rather than answered with an
// error, or was not asked (a caller's cancel, a closed client).
func Unanswered(err error) bool {
	var rerr redis.Error
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, redis.ErrClosed), errors.As(err, &rerr):
		return false
	}
	return true
}
