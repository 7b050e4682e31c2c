package redlockdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// TestWatchWakesOnRelease: a waiter's attempt marks the lock waited-for,
// and its release, published on every node, wakes the key's watchers.
func TestWatchWakesOnRelease(t *testing.T) {
	clients, _ := nodes(t, 3)
	d := newDriver(t, clients)
	ctx := context.Background()
	key := "watch"
	l := acquire(t, d, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Minute})

	woken := make(chan struct{}, 16)
	ready, stop := d.Watch(key, func() {
		select {
		case woken <- struct{}{}:
		default:
		}
	})
	defer stop()
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("the subscription was never confirmed")
	}
	g, err := d.Acquire(ctx, backend.Attempt{Key: key, Owner: owner(t), TTL: time.Minute, Waiter: "locker-b"})
	require.NoError(t, err)
	require.Equal(t, backend.Held, g.Status)

	late := testutil.MeasureLateness(t)
	released := time.Now()
	_, err = d.Release(ctx, l)
	require.NoError(t, err)
	select {
	case <-woken:
		assert.Less(t, time.Since(released), late.Bound(200*time.Millisecond))
	case <-time.After(5 * time.Second):
		t.Fatal("the release woke no watcher")
	}
}

// TestWatchAfterClose: a closed driver's Watch is never ready, and its
// stop is safe to call.
func TestWatchAfterClose(t *testing.T) {
	clients, _ := nodes(t, 3)
	d, err := redlockdriver.New(clients, redlockdriver.WithPrefix(prefix))
	require.NoError(t, err)
	require.NoError(t, d.Close())
	ready, stop := d.Watch("k", func() {})
	require.NotNil(t, ready)
	select {
	case <-ready:
		t.Fatal("ready after Close")
	default:
	}
	stop()
}
