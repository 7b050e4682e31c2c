package electiontest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
)

// Short timings keep takeovers fast; the rules hold (300ms - drift > 200ms > 1.2 × 50ms).
const (
	lease = 300 * time.Millisecond
	renew = 200 * time.Millisecond
	retry = 50 * time.Millisecond
)

func timing(more ...election.Option) []election.Option {
	return append([]election.Option{
		election.WithTTL(lease), election.WithRenewDeadline(renew), election.WithRetryPeriod(retry),
	}, more...)
}

// candidate is an election over a Locker of its own (another process, as
// far as the lock can tell), closed at Cleanup.
func candidate(t *testing.T, c redis.UniversalClient, name string, opts ...election.Option) *election.Election {
	t.Helper()
	e, err := election.New(redistest.Locker(t, c), name, timing(opts...)...)
	require.NoError(t, err)
	return e
}

// proxied returns a client that reaches srv through a proxy the test can
// cut or black-hole.
func proxied(t *testing.T, srv *redistest.RedisServer) (*redis.Client, *testutil.TCPProxy) {
	t.Helper()
	p := testutil.Proxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 100 * time.Millisecond, ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond})
	t.Cleanup(func() { _ = c.Close() })
	return c, p
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// resign releases t (resigns) under a context of its own, failing the
// test on error.
func resign(t *testing.T, term *election.Term) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	require.NoError(t, term.Release(ctx))
}

// redlockCandidate is candidate over a Redlock Locker: no term journal.
func redlockCandidate(t *testing.T, clients []redis.UniversalClient, name string, opts ...election.Option) *election.Election {
	t.Helper()
	e, err := election.New(redistest.Redlock(t, clients), name, timing(opts...)...)
	require.NoError(t, err)
	return e
}

// next receives from an observer's channel, failing the test when nothing
// comes in 10s (a term never journaled would otherwise hang it).
func next(t *testing.T, seen <-chan election.Leader) election.Leader {
	t.Helper()
	select {
	case ld, ok := <-seen:
		require.True(t, ok, "the observer's channel closed")
		return ld
	case <-time.After(10 * time.Second):
		t.Fatal("no term observed within 10s")
		return election.Leader{}
	}
}
