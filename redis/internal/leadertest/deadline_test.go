package leadertest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/leadercheck"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// TestLockDeadline: the deadline of a held lock is about its lease ahead;
// once the Locker's clock passed it (a process resumed after its lease, its
// timers not yet run) it is zero, never "now": a deadline ahead of the
// caller's earlier now would let a deposed leader believe once more.
func TestLockDeadline(t *testing.T) {
	c, _ := redistest.Redis(t)
	var skew atomic.Int64 // how far the Locker's clock is ahead
	l := redistest.Locker(t, c, mutex.WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }))
	lk, err := l.Lock(context.Background(), "k", mutex.WithTTL(10*time.Second), mutex.WithAutoRenew(false))
	require.NoError(t, err)

	before := time.Now()
	d := leadercheck.LockDeadline(l, lk.Token())
	assert.WithinDuration(t, before.Add(10*time.Second), d, time.Second)
	assert.True(t, leadercheck.LockDeadline(l, lk.Token()+1).IsZero(), "another token is not held")
	assert.True(t, leadercheck.LockDeadline(nil, lk.Token()).IsZero(), "a nil Locker holds nothing")

	skew.Store(int64(11 * time.Second))
	assert.True(t, leadercheck.LockDeadline(l, lk.Token()).IsZero(), "a passed deadline is zero")
}
