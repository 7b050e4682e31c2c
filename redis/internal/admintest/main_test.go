package admintest

import (
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// The Example functions find their server in the environment, as a
// reader's program would.
func TestMain(m *testing.M) { redistest.MainWithEnv(m, []string{redistest.EnvRedisAddr}) }

// eachInspectable runs fn on the deployments inspection must read:
// standalone, Cluster and Sentinel.
func eachInspectable(t *testing.T, fn func(t *testing.T, c redis.UniversalClient)) {
	t.Run("standalone", func(t *testing.T) { c, _ := redistest.Redis(t); fn(t, c) })
	t.Run("cluster", func(t *testing.T) { fn(t, redistest.RedisCluster(t, 3).Client) })
	t.Run("sentinel", func(t *testing.T) {
		c := redistest.Sentinel(t).Client()
		t.Cleanup(func() { _ = c.Close() })
		fn(t, c)
	})
}

// newLocker is a Locker over one deployment (redistest.NewLocker: opts are
// mutex and redisdriver options), whose Close at the test's end must
// succeed.
func newLocker(t *testing.T, c redis.UniversalClient, opts ...any) *mutex.Locker {
	t.Helper()
	l, err := redistest.NewLocker(c, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// redlockNodes starts n independent redis-servers and returns plain go-redis
// clients for them, which fail at once when their server is down.
func redlockNodes(t *testing.T, n int) ([]redis.UniversalClient, []*redistest.RedisServer) {
	t.Helper()
	_, srvs := redistest.RedisN(t, n)
	clients := make([]redis.UniversalClient, n)
	for i, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
	}
	return clients, srvs
}

// newRedlock is a Redlock Locker over clients (redistest.NewRedlock),
// closed at the test's end.
func newRedlock(t *testing.T, clients []redis.UniversalClient, opts ...any) *mutex.Locker {
	t.Helper()
	l, err := redistest.NewRedlock(clients, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// adminOf is the Admin over l.
func adminOf(t testing.TB, l *mutex.Locker) *admin.Admin {
	t.Helper()
	a, err := admin.New(l)
	require.NoError(t, err)
	require.Same(t, l, a.Locker())
	return a
}

// viewerOf is an Admin over a Locker of its own on c, as an operator's
// tool would have.
func viewerOf(t *testing.T, c redis.UniversalClient, opts ...any) *admin.Admin {
	t.Helper()
	return adminOf(t, newLocker(t, c, opts...))
}

// waitFor polls cond until it holds or ctx ends: for state that another
// process (here, another Locker) changes on the server, where there is
// nothing local to wait on.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// waitHeldEverywhere waits until every Redlock node has the lock key:
// Lock returns at the quorum, and the last node may still be granting.
func waitHeldEverywhere(t *testing.T, ctx context.Context, nodes []redis.UniversalClient, name string) {
	t.Helper()
	waitFor(t, ctx, "every node holds "+name, func() bool {
		for _, c := range nodes {
			if c.Exists(ctx, name).Val() != 1 {
				return false
			}
		}
		return true
	})
}

// lockEverywhere takes key on the Redlock nodes for a minute and waits
// until every node holds it.
func lockEverywhere(t *testing.T, ctx context.Context, nodes []redis.UniversalClient, key string) *mutex.Lock {
	t.Helper()
	lk, err := newRedlock(t, nodes).Lock(ctx, key, mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	waitHeldEverywhere(t, ctx, nodes, "redfence:{"+key+"}")
	return lk
}

var evalRe = regexp.MustCompile(`cmdstat_(?:evalsha|eval|evalsha_ro|eval_ro):calls=(\d+)`)

// evalCalls sums the script calls in INFO commandstats output.
func evalCalls(info string) int {
	n := 0
	for _, m := range evalRe.FindAllStringSubmatch(info, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// forcedCount is the forced releases counted for reason.
func forcedCount(rm metricdata.ResourceMetrics, reason string) int64 {
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "redfence.lock.forced_releases" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				if v, ok := dp.Attributes.Value("redfence.reason"); ok && v.AsString() == reason {
					n += dp.Value
				}
			}
		}
	}
	return n
}

// keysOf is the locks' keys, in order.
func keysOf(locks []admin.LockInfo) []string {
	out := make([]string, len(locks))
	for i, in := range locks {
		out[i] = in.Key
	}
	return out
}
