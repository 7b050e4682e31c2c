package redisdriver_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/redisdriver"
)

func TestMain(m *testing.M) { redistest.MainWithEnv(m, []string{redistest.EnvRedisAddr}) }

const prefix = "rf:"

func newDriver(t *testing.T, c redis.UniversalClient) *redisdriver.Driver {
	t.Helper()
	d, err := redisdriver.New(c, redisdriver.WithPrefix(prefix))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// key is a key unique to the test, as the Locker gives it: without the
// driver's prefix, which the driver adds.
func key(t *testing.T, name string) string {
	return strings.ReplaceAll(t.Name(), "/", ".") + "." + name
}

// acquire makes one attempt that must be granted, and returns its lease.
func acquire(t *testing.T, d *redisdriver.Driver, k, owner string, ttl time.Duration) backend.Lease {
	t.Helper()
	g, err := d.Acquire(context.Background(), backend.Attempt{Key: k, Owner: owner, TTL: ttl})
	require.NoError(t, err)
	require.Equal(t, backend.Acquired, g.Status)
	require.Positive(t, g.Token)
	require.NotNil(t, g.Handle)
	return backend.Lease{Key: k, Owner: owner, Token: g.Token, TTL: ttl, Handle: g.Handle}
}

// value is the lock key's value, read straight from the server.
func value(t *testing.T, c redis.UniversalClient, k string) redisproto.Value {
	t.Helper()
	s, err := c.Get(context.Background(), redisproto.LockKey(prefix, k)).Result()
	require.NoError(t, err)
	v, ok := redisproto.ParseValue(s)
	require.True(t, ok, "value %q", s)
	return v
}

// order is a go-redis hook that records when each script call starts and
// ends, by script name: for the tests of what waits for what.
type order struct {
	mu     sync.Mutex
	events []string
}

var scriptNames = map[string]string{
	redisproto.AcquireScript.Hash(): "acquire",
	redisproto.ReleaseScript.Hash(): "release",
	redisproto.AbandonScript.Hash(): "abandon",
	redisproto.HandoffScript.Hash(): "handoff",
}

func scriptOf(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	s, _ := args[1].(string)
	switch args[0] {
	case "evalsha":
		return scriptNames[s]
	case "eval":
		sum := sha1.Sum([]byte(s))
		return scriptNames[hex.EncodeToString(sum[:])]
	}
	return ""
}

func (o *order) add(e string) {
	o.mu.Lock()
	o.events = append(o.events, e)
	o.mu.Unlock()
}

// index is where e happened first, -1 if it did not.
func (o *order) index(e string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, x := range o.events {
		if x == e {
			return i
		}
	}
	return -1
}

// lastIndex is where e happened last, -1 if it did not.
func (o *order) lastIndex(e string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := len(o.events) - 1; i >= 0; i-- {
		if o.events[i] == e {
			return i
		}
	}
	return -1
}

func (o *order) snapshot() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.events...)
}

func (o *order) DialHook(next redis.DialHook) redis.DialHook { return next }

func (o *order) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := scriptOf(cmd)
		if name != "" {
			o.add("start " + name)
		}
		err := next(ctx, cmd)
		if name != "" {
			o.add("end " + name)
		}
		return err
	}
}

func (o *order) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// plainClient is a client without ContextTimeoutEnabled (go-redis waits its
// ReadTimeout on a hung server), no retries, and the order hook.
func plainClient(t *testing.T, addr string, readTimeout time.Duration) (*redis.Client, *order) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, ReadTimeout: readTimeout, Protocol: 2, DisableIdentity: true})
	t.Cleanup(func() { _ = c.Close() })
	o := &order{}
	c.AddHook(o)
	return c, o
}

// loadScripts caches the scripts on the server, so that an abandoned call
// is one EVALSHA that lands: go-redis's EVAL after NOSCRIPT would be refused
// at once on the caller's ended context.
func loadScripts(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	for _, s := range []*redis.Script{redisproto.AcquireScript, redisproto.ReleaseScript, redisproto.HandoffScript, redisproto.AbandonScript} {
		require.NoError(t, s.Load(context.Background(), c).Err())
	}
}
