package redisdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
)

// Abandon comes after the abandoned attempt's call returned: on a client
// without ContextTimeoutEnabled the caller gives up at its deadline while
// the call goes on, and the abandon script must not overtake it.
func TestAbandonWaitsForTheAbandonedCall(t *testing.T) {
	addr, _ := testutil.HungServer(t)
	c, o := plainClient(t, addr, 300*time.Millisecond)
	d := newDriver(t, c)
	k := "k"
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	_, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "random-1", TTL: time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, -1, o.index("end acquire"), "the call goes on after Acquire returned")

	actx, acancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer acancel()
	_ = d.Abandon(actx, k, "random-1") // the hung server answers neither
	end, start := o.index("end acquire"), o.index("start abandon")
	require.GreaterOrEqual(t, end, 0, "%v", o.snapshot())
	require.GreaterOrEqual(t, start, 0, "%v", o.snapshot())
	assert.Less(t, end, start, "the abandon script went out after the acquire call ended: %v", o.snapshot())
}

// An abandoned attempt that landed after its caller gave up is freed by
// Abandon: the key is free afterwards, its token kept.
func TestAbandonFreesALateGrant(t *testing.T) {
	c, srv := redistest.Redis(t)
	proxy := testutil.Proxy(t, srv.Addr())
	pc, _ := plainClient(t, proxy.Addr(), 5*time.Second)
	d := newDriver(t, pc)
	k := key(t, "k")
	loadScripts(t, c)
	require.NoError(t, pc.Ping(context.Background()).Err())
	proxy.SetLatency(150 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "random-2", TTL: 10 * time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, d.Abandon(context.Background(), k, "random-2"))
	proxy.Heal()
	v := value(t, c, k)
	assert.True(t, v.Released, "the late grant was freed: %+v", v)
	assert.Positive(t, v.Token, "the fencing counter stays")

	// Shared (WithOwner) attempts are never abandoned: nothing to wait for.
	l := acquire(t, d, k, "mine", time.Second)
	require.NoError(t, d.Abandon(context.Background(), k, "someone-else"))
	assert.Equal(t, "mine", value(t, c, k).Owner, "Abandon frees only owner's")
	_, err = d.Release(context.Background(), l)
	require.NoError(t, err)
}

// A release retried after one given up on waits for it: the two counts land
// in order, and the second finds the key free (-1) rather than racing it.
func TestReleaseAfterAbandonedRelease(t *testing.T) {
	for name, keepHandle := range map[string]bool{"handle": true, "no handle": false} {
		t.Run(name, func(t *testing.T) {
			c, srv := redistest.Redis(t)
			loadScripts(t, c)
			proxy := testutil.Proxy(t, srv.Addr())
			pc, o := plainClient(t, proxy.Addr(), 5*time.Second)
			d := newDriver(t, pc)
			l := acquire(t, d, key(t, "k"), "a", 10*time.Second)
			if !keepHandle {
				l.Handle = nil
			}
			proxy.SetLatency(150 * time.Millisecond)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			_, err := d.Release(ctx, l)
			require.ErrorIs(t, err, context.DeadlineExceeded)

			left, err := d.Release(context.Background(), l)
			require.NoError(t, err)
			assert.EqualValues(t, -1, left, "the abandoned release landed first")
			ev := o.snapshot()
			require.Len(t, ev, 6, "acquire, then two releases: %v", ev)
			assert.Equal(t, []string{"start release", "end release", "start release", "end release"}, ev[2:],
				"the retry went out after the abandoned release ended")
		})
	}
}

// A release after a handoff given up on waits for it too.
func TestReleaseAfterAbandonedHandOff(t *testing.T) {
	c, srv := redistest.Redis(t)
	loadScripts(t, c)
	proxy := testutil.Proxy(t, srv.Addr())
	pc, o := plainClient(t, proxy.Addr(), 5*time.Second)
	d := newDriver(t, pc)
	k := key(t, "k")
	l := acquire(t, d, k, "a", 10*time.Second)
	proxy.SetLatency(150 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, _, err := d.HandOff(ctx, l, backend.Attempt{Key: k, Owner: "b", TTL: time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	left, err := d.Release(context.Background(), l)
	require.NoError(t, err)
	assert.EqualValues(t, -1, left, "handed off first")
	assert.Less(t, o.index("end handoff"), o.index("start release"), "%v", o.snapshot())
}

// When Abandon's ctx ends before the abandoned call did, the abandon script
// runs in the background once it ended, and Close waits for it.
func TestAbandonInTheBackground(t *testing.T) {
	c, srv := redistest.Redis(t)
	loadScripts(t, c)
	proxy := testutil.Proxy(t, srv.Addr())
	pc, o := plainClient(t, proxy.Addr(), 5*time.Second)
	d := newDriver(t, pc)
	k := key(t, "k")
	require.NoError(t, pc.Ping(context.Background()).Err())
	proxy.SetLatency(150 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := d.Acquire(ctx, backend.Attempt{Key: k, Owner: "random-3", TTL: 10 * time.Second})
	require.ErrorIs(t, err, context.DeadlineExceeded)
	err = d.Abandon(ctx, k, "random-3")
	require.ErrorIs(t, err, context.DeadlineExceeded)

	require.NoError(t, d.Close()) // waits for the background abandon
	assert.Less(t, o.index("end acquire"), o.index("start abandon"), "%v", o.snapshot())
	v := value(t, c, k)
	assert.True(t, v.Released, "freed: %+v", v)
}

// When a retried Release's ctx ends before the release it follows did (a
// client without ContextTimeoutEnabled waits for its read timeout), the
// retry goes out in the background once that call ended, rather than not
// at all; Close waits for it. Here the first release never reached the
// server (its connection was cut), so only the retry frees the key.
func TestReleaseRetryInTheBackground(t *testing.T) {
	c, srv := redistest.Redis(t)
	loadScripts(t, c)
	proxy := testutil.Proxy(t, srv.Addr())
	pc, o := plainClient(t, proxy.Addr(), 5*time.Second)
	d := newDriver(t, pc)
	k := key(t, "k")
	l := acquire(t, d, k, "a", 30*time.Second)
	proxy.BlackHole()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := d.Release(ctx, l)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = d.Release(ctx, l) // the Locker's retry, its ctx already over
	require.ErrorIs(t, err, context.DeadlineExceeded)
	proxy.Cut() // the first release fails without reaching the server
	proxy.Heal()

	require.NoError(t, d.Close()) // waits for the background retry
	assert.Less(t, o.index("end release"), o.lastIndex("start release"), "%v", o.snapshot())
	v := value(t, c, k)
	assert.True(t, v.Released, "the retry freed it: %+v", v)
}
