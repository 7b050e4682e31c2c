package redlockdriver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// TestMain starts the three servers the examples find in REDLOCK_ADDRS.
func TestMain(m *testing.M) { redistest.MainWithEnv(m, []string{redistest.EnvRedlockAddrs}) }

// prefix is every test's WithPrefix: keys reach the driver without it, and
// the driver puts it on their Redis keys.
const prefix = "t:"

// nodes starts n independent redis-servers and returns plain go-redis
// clients for them (ContextTimeoutEnabled off, go-redis's default): the
// driver must bound its node calls itself.
func nodes(t *testing.T, n int) ([]redis.UniversalClient, []*redistest.RedisServer) {
	t.Helper()
	_, srvs := redistest.RedisN(t, n)
	clients := make([]redis.UniversalClient, n)
	for i, s := range srvs {
		clients[i] = client(t, s.Addr())
	}
	return clients, srvs
}

func client(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newDriver returns a Driver over clients, closed (before the clients) at
// the test's end.
func newDriver(t *testing.T, clients []redis.UniversalClient, opts ...redlockdriver.Option) *redlockdriver.Driver {
	t.Helper()
	d, err := redlockdriver.New(clients, append([]redlockdriver.Option{redlockdriver.WithPrefix(prefix)}, opts...)...)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, d.Close()) })
	return d
}

// owner is a random owner id, as the Locker makes them.
func owner(t *testing.T) string {
	t.Helper()
	b := make([]byte, 16)
	_, err := rand.Read(b)
	require.NoError(t, err)
	return hex.EncodeToString(b)
}

// acquire makes an attempt that must be granted, and returns its lease.
func acquire(t *testing.T, d *redlockdriver.Driver, a backend.Attempt) backend.Lease {
	t.Helper()
	g, err := d.Acquire(context.Background(), a)
	require.NoError(t, err)
	require.Contains(t, []backend.Status{backend.Acquired, backend.Reentered}, g.Status, "detail: %v", g.Detail)
	require.Positive(t, g.Token)
	return backend.Lease{Key: a.Key, Owner: a.Owner, Token: g.Token, Handle: g.Handle}
}

// value is what node c stores for key (under the prefix); "" when none.
func value(t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	v, err := c.Get(context.Background(), redisproto.LockKey(prefix, key)).Result()
	if err == redis.Nil {
		return ""
	}
	require.NoError(t, err)
	return v
}

// holder is the owner a node's stored value names; "" when free.
func holder(t *testing.T, c redis.UniversalClient, key string) string {
	t.Helper()
	v, ok := redisproto.ParseValue(value(t, c, key))
	if !ok || v.Released {
		return ""
	}
	return v.Owner
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	require.Eventually(t, cond, 10*time.Second, time.Millisecond, what)
}

// released waits until no node of clients holds key: a Release returns
// once a majority freed it, and the other nodes finish in the background.
func released(t *testing.T, clients []redis.UniversalClient, key string) {
	t.Helper()
	waitFor(t, "every node to release "+key, func() bool {
		for _, c := range clients {
			if holder(t, c, key) != "" {
				return false
			}
		}
		return true
	})
}
