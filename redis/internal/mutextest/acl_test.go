package mutextest

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
	"github.com/redfence/redfence/runner"
)

// The Redis ACL that SECURITY.md documents is enough for what redfence
// does: locks, waiting with wake-ups, renewal, inspection, a listing, a
// forced release with its audit, asynqlock's busy record and a runner slot.
func TestDocumentedACL(t *testing.T) {
	doc, err := os.ReadFile("../../../SECURITY.md")
	require.NoError(t, err)
	block := regexp.MustCompile("(?s)```\n(ACL SETUSER redfence .*?)\n```").FindSubmatch(doc)
	require.NotNil(t, block, "SECURITY.md has no ACL SETUSER redfence block")
	args := []any{}
	for _, f := range strings.Fields(strings.ReplaceAll(string(block[1]), "change-me", "pw")) {
		args = append(args, f)
	}
	root, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, root.Do(ctx, args...).Err())
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "redfence", Password: "pw", ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })

	holder, waiter := newLocker(t, c), newLocker(t, c)
	inspector := adminOf(t, holder)
	lk, err := holder.Lock(ctx, "acct:1", mutex.WithTTL(time.Second))
	require.NoError(t, err)
	got := make(chan error, 1)
	go func() {
		wl, err := waiter.Lock(ctx, "acct:1")
		if err == nil {
			err = wl.Release(ctx)
		}
		got <- err
	}()
	waitFor(t, ctx, "the waiter queued", func() bool {
		in, err := inspector.Inspect(ctx, "acct:1")
		require.NoError(t, err)
		return len(in.Waiters) == 1
	})
	require.NoError(t, lk.Extend(ctx, 2*time.Second))
	_, err = lk.TTL(ctx)
	require.NoError(t, err)
	require.NoError(t, lk.Release(ctx))
	require.NoError(t, <-got, "the waiter, woken")

	viewer := newLocker(t, c)
	ops := adminOf(t, viewer)
	_, err = holder.Lock(ctx, "acct:2", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	locks, err := ops.ListAll(ctx, admin.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, locks, 1)
	_, err = ops.ForceRelease(ctx, "acct:2", admin.ForceOptions{Reason: "acl"})
	require.NoError(t, err)
	in, err := ops.Inspect(ctx, "acct:2")
	require.NoError(t, err)
	assert.Len(t, in.Forced, 1, "the audit entry")

	_, err = asynqlock.Busy(ctx, viewer, "acct:3")
	require.NoError(t, err)

	r, err := runner.New(viewer, runner.WithErrorHook(func(_ string, _ runner.Run, err error) { t.Errorf("runner: %v", err) }))
	require.NoError(t, err)
	ran := make(chan struct{}, 1)
	require.NoError(t, r.Add("acl", 100*time.Millisecond, func(context.Context, runner.Run) error {
		select {
		case ran <- struct{}{}:
		default:
		}
		return nil
	}))
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	select {
	case <-ran:
	case <-ctx.Done():
		t.Fatal("no runner slot ran")
	}
	stop()
	require.NoError(t, <-done)
	waitFor(t, ctx, "the run recorded", func() bool {
		_, err := r.Last(ctx, "acl")
		return err == nil
	})
}
