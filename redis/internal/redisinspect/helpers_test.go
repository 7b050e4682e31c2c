package redisinspect_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/internal/redisinspect"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

func TestMain(m *testing.M) { redistest.MainWithEnv(m, []string{redistest.EnvRedisAddr}) }

// prefix is every test's key prefix: one with glob characters, which the
// SCAN pattern must quote.
const prefix = "rf[t]:"

// newInspector builds an Inspector over cfg with a Go that the test owns,
// as a driver would: at cleanup it closes the servers' clients, which ends
// the calls it abandoned, and waits for them.
func newInspector(t *testing.T, cfg redisinspect.Config) *redisinspect.Inspector {
	t.Helper()
	var wg sync.WaitGroup
	if cfg.Prefix == "" {
		cfg.Prefix = prefix
	}
	cfg.Go = func(fn func()) { wg.Go(fn) }
	t.Cleanup(func() {
		for _, c := range cfg.Servers {
			if c != nil {
				_ = c.Close()
			}
		}
		wg.Wait()
	})
	return redisinspect.New(cfg)
}

// nodes are n independent servers for Redlock, with clients that fail at
// once when their server is down, and their addresses.
func nodes(t *testing.T, n int) ([]redis.UniversalClient, []string, []*redistest.RedisServer) {
	t.Helper()
	_, srvs := redistest.RedisN(t, n)
	clients := make([]redis.UniversalClient, n)
	addrs := make([]string, n)
	for i, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i], addrs[i] = c, s.Addr()
	}
	return clients, addrs, srvs
}

// testCtx bounds a test's calls.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// name is the Redis key of user key k.
func name(k string) string { return redisproto.LockKey(prefix, k) }

// acquire takes k for owner with the real acquire script, with a proposed
// token ("" for none, as one deployment's Locker sends), and returns its
// token.
func acquire(t *testing.T, ctx context.Context, c redis.Scripter, k, owner string, ttl time.Duration, proposal string) int64 {
	t.Helper()
	reply, err := redisproto.AcquireScript.Run(ctx, c, []string{name(k)}, owner, ttl.Milliseconds(), "3600000", proposal).Result()
	require.NoError(t, err)
	n, _, err := redisproto.ParseAcquire(reply)
	require.NoError(t, err)
	require.NotZero(t, n[0], "%s is held by another owner", k)
	return n[1]
}

// queue makes a waiting attempt at k, held by another owner: it marks k
// waited-for and puts locker in k's queue.
func queue(t *testing.T, ctx context.Context, c redis.Scripter, k, owner, locker string) {
	t.Helper()
	reply, err := redisproto.AcquireScript.Run(ctx, c, []string{name(k), redisproto.QueueOf(name(k))}, owner, 60000, "3600000", "", locker).Result()
	require.NoError(t, err)
	n, _, err := redisproto.ParseAcquire(reply)
	require.NoError(t, err)
	require.Zero(t, n[0], "the waiting attempt acquired %s", k)
}

// release takes one count of owner's lock on k.
func release(t *testing.T, ctx context.Context, c redis.Scripter, k, owner string, token int64) {
	t.Helper()
	tok := strconv.FormatInt(token, 10)
	left, err := redisproto.ReleaseScript.Run(ctx, c, []string{name(k)}, redisproto.ReleaseValue(owner, tok, time.Minute), tok).Int64()
	require.NoError(t, err)
	require.GreaterOrEqual(t, left, int64(0), "%s was not held by %s", k, owner)
}

// proposal is a Redlock token proposal, as its client makes one: its clock
// in µs, 100 ms ahead.
func proposal() string {
	return strconv.FormatInt(time.Now().Add(100*time.Millisecond).UnixMicro(), 10)
}

// micros is t as a lock value writes it.
func micros(t time.Time) string { return strconv.FormatInt(t.UnixMicro(), 10) }
