package etcddriver

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/mutex/backend"
)

// A watch resumed from a revision compacted meanwhile (as after a reconnect)
// reads the key afresh: the delete it can no longer be told of still wakes
// the waiter (etcd issue 9715 lost it).
func TestWatchFromCompactedRevisionReadsAfresh(t *testing.T) {
	s := etcdtest.Start(t)
	cli := s.Client(t)
	b, err := New(cli)
	require.NoError(t, err)
	t.Cleanup(func() { _ = b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	g, err := b.Acquire(ctx, backend.Attempt{Key: "c", Owner: "a", TTL: time.Hour})
	require.NoError(t, err)
	seen := g.Token + 1 // the waiter's watch had reported up to here
	_, err = b.Release(ctx, backend.Lease{Key: "c", Owner: "a", Token: g.Token})
	require.NoError(t, err)
	r, err := cli.Put(ctx, "other", "x")
	require.NoError(t, err)
	_, err = cli.Compact(ctx, r.Header.Revision)
	require.NoError(t, err)

	woken := make(chan struct{}, 1)
	wctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.watch(wctx, b.name("c"), seen, func() {
			select {
			case woken <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { stop(); <-done }()
	select {
	case <-woken:
	case <-ctx.Done():
		t.Fatal("the waiter was never woken")
	}
}
