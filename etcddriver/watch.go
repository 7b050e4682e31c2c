package etcddriver

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Bounds of the pause before a watch that ended is made again, and of one
// fresh read.
const (
	rewatchMin = 50 * time.Millisecond
	rewatchMax = 2 * time.Second
	readWithin = 5 * time.Second
)

// Watch calls wake each time key may have been freed, until stop: one
// goroutine per call, owned by the Driver (stop and Close end it and wait
// for it). It first reads key (absent: wake), then watches its deletes from
// the revision after that read; a watch that ends (a lost leader, a closed
// stream) is made again from the revision after the last one it reported,
// so no delete in between is missed. A watch whose revision was compacted
// meanwhile (ErrCompacted) starts over with a fresh read: a waiter is never
// left waiting for a delete it can no longer be told of. A wake may be
// spurious (a key freed and taken again); it costs the waiter an attempt.
//
// ready is nil: the first read covers a release made before the watch is
// in place.
func (b *Driver) Watch(key string, wake func()) (ready <-chan struct{}, stop func()) {
	if b.check(key, "", false) != nil || wake == nil {
		return nil, func() {}
	}
	key = b.name(key)
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil, func() {}
	}
	b.watches.Add(1) // under mu, so that Close waits for it
	b.running++
	b.mu.Unlock()
	ctx, cancel := context.WithCancel(b.ctx)
	done := make(chan struct{})
	go func() {
		defer b.watches.Done()
		defer close(done)
		b.watch(ctx, key, 0, wake)
		b.mu.Lock()
		b.running--
		b.mu.Unlock()
	}()
	return nil, func() {
		cancel()
		<-done
	}
}

// watch runs until ctx ends, from revision rev (0: read first).
func (b *Driver) watch(ctx context.Context, key string, rev int64, wake func()) {
	pause := rewatchMin
	for ctx.Err() == nil {
		if rev == 0 {
			rev = b.freshRead(ctx, key, wake)
		}
		if rev != 0 {
			var progressed bool
			rev, progressed = b.watchFrom(ctx, key, rev, wake)
			if progressed {
				pause = rewatchMin
			}
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		pause = min(2*pause, rewatchMax)
	}
}

// freshRead wakes when key is absent and returns the revision to watch from,
// or 0 when etcd did not answer.
func (b *Driver) freshRead(ctx context.Context, key string, wake func()) int64 {
	rctx, cancel := context.WithTimeout(ctx, readWithin)
	defer cancel()
	r, err := b.c.Get(rctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return 0
	}
	if len(r.Kvs) == 0 {
		wake()
	}
	return r.Header.Revision + 1
}

// watchFrom watches key's deletes from rev until the watch ends; it returns
// the revision to go on from (0: compacted, read afresh) and whether any
// answer came.
func (b *Driver) watchFrom(ctx context.Context, key string, rev int64, wake func()) (int64, bool) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	progressed := false
	defer b.streaming(&progressed, false)
	for resp := range b.c.Watch(wctx, key, clientv3.WithRev(rev), clientv3.WithFilterPut(), clientv3.WithCreatedNotify()) {
		if resp.CompactRevision != 0 {
			b.mu.Lock()
			b.compacted++
			b.mu.Unlock()
			return 0, true
		}
		if resp.Err() != nil {
			return rev, progressed
		}
		b.streaming(&progressed, true)
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				wake()
			}
			rev = max(rev, ev.Kv.ModRevision+1)
		}
	}
	return rev, progressed
}

// streaming marks a watch's stream as created (on) or ended, for the tests.
func (b *Driver) streaming(progressed *bool, on bool) {
	if *progressed == on {
		return
	}
	*progressed = on
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.streams++
	} else {
		b.streams--
	}
}
