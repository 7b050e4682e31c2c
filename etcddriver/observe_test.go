package etcddriver_test

import (
	"context"
	"sync/atomic"

	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/mutex/backend"
)

// backendAll is what an etcddriver.Driver offers a Locker; a wrapper that
// keeps it all keeps the Locker's behaviour.
type backendAll interface {
	backend.Backend
	backend.Watcher
	backend.Inspector
}

// observed is an etcddriver Driver that tells a test what its Locker did, as
// it happened: the attempts that found the key held, each grant, each
// wake-up of a watch. onGrant and onWake are set before the Locker runs.
type observed struct {
	*etcddriver.Driver
	held    atomic.Int32
	onGrant func(backend.Grant) // after an attempt acquired or re-entered
	onWake  func()              // before a watch wakes the Locker
}

func (o *observed) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	g, err := o.Driver.Acquire(ctx, a)
	switch {
	case err != nil:
	case g.Status == backend.Held:
		o.held.Add(1)
	case o.onGrant != nil:
		o.onGrant(g)
	}
	return g, err
}

func (o *observed) Watch(key string, wake func()) (<-chan struct{}, func()) {
	return o.Driver.Watch(key, func() {
		if o.onWake != nil {
			o.onWake()
		}
		wake()
	})
}

// waiters is the number of l's calls waiting for key while l holds it.
func waiters(l *mutex.Locker, key string) int {
	a, err := admin.New(l)
	if err != nil {
		return -1
	}
	for _, h := range a.Held() {
		if h.Key == key {
			return h.Waiters
		}
	}
	return 0
}
