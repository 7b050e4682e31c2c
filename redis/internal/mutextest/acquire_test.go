package mutextest

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redfence/redfence/redis/internal/redisproto"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// TestLeaseOverBeforeTheReply: the acquire's reply arrives after the lease
// it asked for has run out (the server was paused meanwhile). That grant is
// given back, never handed out; Lock tries again and returns a live lock,
// and the Locker closes promptly.
func TestLeaseOverBeforeTheReply(t *testing.T) {
	_, srv := redistest.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	sent := &sentHook{at: make(chan struct{}, 1)}
	c.AddHook(sent)
	l := mustLocker(t, c)
	ctx := context.Background()
	warm, err := l.Lock(ctx, "late")
	require.NoError(t, err)
	require.NoError(t, warm.Release(ctx))

	srv.Pause()
	sent.armed.Store(true)
	type result struct {
		lk       *mutex.Lock
		err      error
		returned time.Time
	}
	got := make(chan result, 1)
	go func() {
		lk, err := l.Lock(ctx, "late", mutex.WithTTL(50*time.Millisecond))
		got <- result{lk, err, time.Now()}
	}()
	<-sent.at                          // the acquire is on its way to the paused server
	time.Sleep(200 * time.Millisecond) // the pause: four leases long
	srv.Resume()
	r := <-got
	require.NoError(t, r.err)
	assert.True(t, r.lk.Deadline().After(r.returned), "Lock returned a lock whose lease had already ended")
	if err := r.lk.Release(ctx); err != nil {
		assert.ErrorIs(t, err, mutex.ErrNotHeld, "a 50ms lease may run out under load")
	}
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	select {
	case <-closed:
	case <-time.After(2 * time.Second):
		t.Fatal("Close hung")
	}
}

// sentHook signals once armed, when the next command is sent.
type sentHook struct {
	armed atomic.Bool
	at    chan struct{} // buffered, one
}

func (h *sentHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *sentHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.armed.CompareAndSwap(true, false) {
			h.at <- struct{}{}
		}
		return next(ctx, cmd)
	}
}
func (h *sentHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// The acquire script answers the common case with the token alone and a
// held lock with minus its remaining lease; anything else it could not have
// sent is an error, never a panic.
func TestAcquireReplies(t *testing.T) {
	for _, tc := range []struct {
		reply any
		want  [3]int64
		str   string
	}{
		{"1795972944858361", [3]int64{1, 1795972944858361, 0}, "1795972944858361"},
		{int64(-250), [3]int64{0, 0, 250}, ""},
		{[]any{int64(2), "1795972944858361", int64(3)}, [3]int64{2, 1795972944858361, 3}, "1795972944858361"},
	} {
		n, s, err := redisproto.ParseAcquire(tc.reply)
		require.NoError(t, err, "%#v", tc.reply)
		assert.Equal(t, tc.want, n, "%#v", tc.reply)
		assert.Equal(t, tc.str, s, "%#v", tc.reply)
	}
	for _, bad := range []any{nil, int64(0), int64(7), "", "12a", []any{int64(1)}, []any{"x", "y", "z"}, 3.5} {
		_, _, err := redisproto.ParseAcquire(bad)
		assert.Error(t, err, "%#v", bad)
	}
}
