package redistest_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/localpg"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func ping(c redis.UniversalClient, within time.Duration) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	start := time.Now()
	err := c.Ping(ctx).Err()
	return time.Since(start), err
}

func TestRedisPauseResume(t *testing.T) {
	c, srv := redistest.Redis(t)
	_, err := ping(c, time.Second)
	require.NoError(t, err)

	srv.Pause()
	_, err = ping(c, 200*time.Millisecond)
	require.Error(t, err, "a paused server must not answer")
	assert.True(t, errors.Is(err, context.DeadlineExceeded) || isTimeout(err), "want a deadline error, got %v", err)

	srv.Resume()
	require.Eventually(t, func() bool { _, err := ping(c, 200*time.Millisecond); return err == nil },
		5*time.Second, 10*time.Millisecond, "Resume must heal the server")
}

func isTimeout(err error) bool {
	var ne interface{ Timeout() bool }
	return errors.As(err, &ne) && ne.Timeout()
}

func TestRedisKillRestart(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx := context.Background()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	port := srv.Port()

	srv.Kill()
	assert.Equal(t, 0, srv.PID())
	_, err := ping(c, 300*time.Millisecond)
	require.Error(t, err, "a killed server must not answer")

	srv.Restart()
	assert.Equal(t, port, srv.Port(), "same port after restart")
	require.Eventually(t, func() bool { _, err := ping(c, 200*time.Millisecond); return err == nil },
		5*time.Second, 10*time.Millisecond)
	n, err := c.DBSize(ctx).Result()
	require.NoError(t, err)
	assert.Zero(t, n, "a restarted server starts empty")
	assert.ErrorIs(t, c.Get(ctx, "k").Err(), redis.Nil)
}

func TestProxy(t *testing.T) {
	_, srv := redistest.Redis(t)
	p := testutil.Proxy(t, srv.Addr())
	c := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })

	fast, err := ping(c, time.Second)
	require.NoError(t, err)

	t.Run("latency", func(t *testing.T) {
		p.SetLatency(50 * time.Millisecond)
		d, err := ping(c, 2*time.Second)
		require.NoError(t, err)
		// Both directions are delayed: at least one full latency each way.
		assert.GreaterOrEqual(t, d, 100*time.Millisecond, "latency must be visible (unproxied took %v)", fast)
		p.Heal()
		late := testutil.MeasureLateness(t)
		d, err = ping(c, time.Second)
		require.NoError(t, err)
		late.Stop()
		assert.Less(t, d, late.Bound(50*time.Millisecond), "healed: no latency left")
	})

	t.Run("one-way delay", func(t *testing.T) {
		// A round trip costs twice the delay, also below a millisecond,
		// where a Go timer would round each wait up.
		const d = 500 * time.Microsecond
		p.SetLatency(d)
		defer p.Heal()
		late := testutil.MeasureLateness(t)
		var rtts []time.Duration
		for range 21 {
			rtt, err := ping(c, time.Second)
			require.NoError(t, err)
			rtts = append(rtts, rtt)
		}
		late.Stop()
		slices.Sort(rtts)
		// A delay aims early by the wake-up lag it learnt, at most 150µs.
		assert.GreaterOrEqual(t, rtts[0], 2*(d-150*time.Microsecond))
		assert.Less(t, rtts[10], late.Bound(2*d+time.Millisecond), "median round trip (unproxied took %v)", fast)
	})

	t.Run("delays overlap within a connection", func(t *testing.T) {
		// Two commands sent 5ms apart on one connection: the second reply
		// comes 2d after the second command, not after the first reply.
		const d = 20 * time.Millisecond
		p.SetLatency(d)
		defer p.Heal()
		conn, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		defer conn.Close()
		late := testutil.MeasureLateness(t)
		start := time.Now()
		_, err = conn.Write([]byte("PING\r\n"))
		require.NoError(t, err)
		time.Sleep(5 * time.Millisecond)
		_, err = conn.Write([]byte("PING\r\n"))
		require.NoError(t, err)
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(2*time.Second)))
		r := bufio.NewReader(conn)
		for range 2 {
			line, err := r.ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "+PONG\r\n", line)
		}
		took := time.Since(start)
		late.Stop()
		assert.GreaterOrEqual(t, took, 2*d+5*time.Millisecond-300*time.Microsecond)
		assert.Less(t, took, late.Bound(2*d+12*time.Millisecond), "one delay after another would take 3d")
	})

	t.Run("connections are delayed independently", func(t *testing.T) {
		// Independent delays make every round trip 2d; a proxy that
		// serialized any two connections would make one of them 4d. The
		// bound sits between, with room for 8 goroutines' scheduling on a
		// busy host (17 ms seen under make test's parallel packages).
		const d, n = 20 * time.Millisecond, 8
		p.SetLatency(d)
		defer p.Heal()
		clients := make([]*redis.Client, n)
		for i := range clients {
			clients[i] = redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, PoolSize: 1, ContextTimeoutEnabled: true})
			defer clients[i].Close()
			_, err := ping(clients[i], time.Second) // connected before the race
			require.NoError(t, err)
		}
		late := testutil.MeasureLateness(t)
		rtts := make([]time.Duration, n)
		var wg sync.WaitGroup
		for i, cl := range clients {
			wg.Go(func() { rtts[i], _ = ping(cl, time.Second) })
		}
		wg.Wait()
		late.Stop()
		assert.Less(t, slices.Max(rtts), late.Bound(2*d+3*d/2), "all round trips: %v", rtts)
	})

	t.Run("black hole", func(t *testing.T) {
		p.BlackHole()
		_, err := ping(c, 200*time.Millisecond)
		require.Error(t, err, "a black hole must swallow the request")
		p.Heal()
		// The timed-out connection is discarded by the client; a new one works.
		require.Eventually(t, func() bool { _, err := ping(c, 200*time.Millisecond); return err == nil },
			5*time.Second, 10*time.Millisecond, "Heal must restore service")
	})

	t.Run("new connections in a black hole hang", func(t *testing.T) {
		p.BlackHole()
		fresh := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1, ContextTimeoutEnabled: true})
		defer fresh.Close()
		_, err := ping(fresh, 200*time.Millisecond)
		require.Error(t, err)
		p.Heal()
		_, err = ping(fresh, time.Second)
		require.NoError(t, err)
	})

	t.Run("cut", func(t *testing.T) {
		// Hold a connection open in a blocking read, then cut it.
		errc := make(chan error, 1)
		go func() { errc <- c.BLPop(context.Background(), 5*time.Second, "never").Err() }()
		require.Eventually(t, func() bool {
			clients, _ := srv.Client().ClientList(context.Background()).Result()
			return strings.Contains(clients, "cmd=blpop")
		}, 2*time.Second, 10*time.Millisecond)
		p.Cut()
		select {
		case err := <-errc:
			require.Error(t, err)
			assert.NotErrorIs(t, err, redis.Nil, "cut must end the connection, not time out")
		case <-time.After(2 * time.Second):
			t.Fatal("Cut did not close the client's connection")
		}
		_, err := ping(c, time.Second)
		require.NoError(t, err, "new connections pass after a cut")
	})
}

func TestRedisN(t *testing.T) {
	clients, servers := redistest.RedisN(t, 3)
	require.Len(t, clients, 3)
	seen := map[string]bool{}
	for i, c := range clients {
		require.NoError(t, c.Set(context.Background(), "only-here", i, 0).Err())
		seen[servers[i].Addr()] = true
	}
	assert.Len(t, seen, 3, "independent servers on distinct ports")
	for i, c := range clients {
		v, err := c.Get(context.Background(), "only-here").Int()
		require.NoError(t, err)
		assert.Equal(t, i, v, "servers share nothing")
	}
}

func TestRedisCluster(t *testing.T) {
	cl := redistest.RedisCluster(t, 3)
	ctx := context.Background()
	for _, m := range cl.Masters {
		info, err := m.Client().ClusterInfo(ctx).Result()
		require.NoError(t, err)
		assert.Contains(t, info, "cluster_state:ok")
		assert.Contains(t, info, "cluster_slots_assigned:16384")
	}
	for i := range 300 {
		require.NoError(t, cl.Client.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err())
	}
	// Every master owns some of the keys.
	for _, m := range cl.Masters {
		n, err := m.Client().DBSize(ctx).Result()
		require.NoError(t, err)
		assert.Positive(t, n, "master %s stores no keys", m.Addr())
	}
}

// TestRedisClusterPromote: a paused master's replica takes its slots over
// with the data it replicated, and the other masters route to it.
func TestRedisClusterPromote(t *testing.T) {
	cl := redistest.RedisCluster(t, 3, redistest.WithReplicas(1))
	ctx := context.Background()
	for i := range cl.Masters {
		require.Len(t, cl.Replicas[i], 1)
	}
	m, err := cl.Client.MasterForKey(ctx, "k")
	require.NoError(t, err)
	i := slices.IndexFunc(cl.Masters, func(s *redistest.RedisServer) bool { return s.Addr() == m.Options().Addr })
	require.NotEqual(t, -1, i)
	require.NoError(t, cl.Client.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, m.Do(ctx, "WAIT", 1, 5000).Err()) // the replica has it

	cl.Masters[i].Pause()
	r := cl.Promote(t, i)
	rc := r.Client()
	t.Cleanup(func() { _ = rc.Close() })
	role, err := rc.Do(ctx, "ROLE").Slice()
	require.NoError(t, err)
	assert.Equal(t, "master", role[0])
	v, err := rc.Get(ctx, "k").Result()
	require.NoError(t, err, "the promoted replica serves the slot")
	assert.Equal(t, "v", v)
	other := cl.Masters[(i+1)%len(cl.Masters)].Client()
	t.Cleanup(func() { _ = other.Close() })
	err = other.Get(ctx, "k").Err()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "MOVED")
	assert.Contains(t, err.Error(), r.Addr(), "the others route the slot to it")
}

func TestPostgresPackageDatabase(t *testing.T) {
	pool := testutil.Postgres(t)
	var name string
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT current_database()").Scan(&name))
	assert.True(t, strings.HasPrefix(name, "redfence_redistest_"), "database %q is the package's own", name)

	// A second call in the same package gets the same database.
	var again string
	require.NoError(t, testutil.Postgres(t).QueryRow(context.Background(), "SELECT current_database()").Scan(&again))
	assert.Equal(t, name, again)

	// Another test binary (another package) gets another database.
	out := helper(t, "postgres-db", nil)
	other := field(out, "DB=")
	assert.True(t, strings.HasPrefix(other, "redfence_"), "helper printed %q", out)
	assert.NotEqual(t, name, other)

	// And the helper's database is dropped when its tests end.
	var exists bool
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", other).Scan(&exists))
	assert.False(t, exists, "the other package's database must be dropped at its end")
}

// TestNoServerOutlivesTheTestBinary runs a test binary that starts a
// redis-server and then dies of a panic, and checks that the server died too.
func TestNoServerOutlivesTheTestBinary(t *testing.T) {
	for _, mode := range []string{"redis-panic", "redis-exit"} {
		t.Run(mode, func(t *testing.T) {
			out := helper(t, mode, nil)
			pid, _ := strconv.Atoi(field(out, "PID="))
			require.NotZero(t, pid, "helper output: %s", out)
			require.Eventually(t, func() bool { return !alive(pid) }, 5*time.Second, 10*time.Millisecond,
				"redis-server %d outlived its test binary", pid)
		})
	}
}

func TestMissingRedisBinaryFailsWithInstallHint(t *testing.T) {
	out := helper(t, "redis-missing", []string{"PATH=/nonexistent"})
	assert.Contains(t, out, "apt-get install redis-server")
	assert.Contains(t, out, "FAIL")
}

// field returns the rest of the first output line that starts with prefix.
func field(out, prefix string) string {
	for line := range strings.Lines(out) {
		if s, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return s
		}
	}
	return ""
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

// helper runs this test binary again as TestHelperProcess in the given mode
// and returns its combined output.
func helper(t *testing.T, mode string, env []string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
	cmd.Env = append(append(os.Environ(), "REDFENCE_HELPER="+mode), env...)
	out, _ := cmd.CombinedOutput()
	return string(out)
}

func TestHelperProcess(t *testing.T) {
	mode := os.Getenv("REDFENCE_HELPER")
	switch mode {
	case "":
		return // not a helper run
	case "redis-panic", "redis-exit":
		_, srv := redistest.Redis(t)
		w := bufio.NewWriter(os.Stdout)
		fmt.Fprintf(w, "PID=%d\n", srv.PID())
		_ = w.Flush()
		if mode == "redis-panic" {
			panic("helper dies holding a redis-server")
		}
		os.Exit(3) // no cleanup runs at all
	case "redis-missing":
		redistest.Redis(t)
	case "postgres-db":
		var name string
		require.NoError(t, testutil.Postgres(t).QueryRow(context.Background(), "SELECT current_database()").Scan(&name))
		fmt.Println("DB=" + name)
	case "mysql-db":
		var name string
		require.NoError(t, testutil.MySQL(t).QueryRow("SELECT DATABASE()").Scan(&name))
		fmt.Println("DB=" + name)
	}
}

func TestMySQLPackageDatabase(t *testing.T) {
	db := testutil.MySQL(t)
	var name string
	require.NoError(t, db.QueryRow("SELECT DATABASE()").Scan(&name))
	assert.True(t, strings.HasPrefix(name, "redfence_redistest_"), "database %q is the package's own", name)

	// A second call in the same package gets the same database.
	var again string
	require.NoError(t, testutil.MySQL(t).QueryRow("SELECT DATABASE()").Scan(&again))
	assert.Equal(t, name, again)

	// Another test binary (another package) gets another database, dropped
	// when its tests end.
	out := helper(t, "mysql-db", nil)
	other := field(out, "DB=")
	assert.True(t, strings.HasPrefix(other, "redfence_"), "helper printed %q", out)
	assert.NotEqual(t, name, other)
	var n int
	require.NoError(t, db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", other).Scan(&n))
	assert.Zero(t, n, "the other package's database must be dropped at its end")
}

// TestRefusedAddrStaysRefused: a dial to the address is refused, and while
// the test runs no one else can listen there, with or without SO_REUSEADDR
// (which Go sets on every listener).
func TestRefusedAddrStaysRefused(t *testing.T) {
	addr := testutil.RefusedAddr(t)
	_, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED)
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		_ = ln.Close()
	}
	require.ErrorIs(t, err, syscall.EADDRINUSE, "another listener took the refused address's port")
}

// TestMySQLMissing: with no server at the DSN the test fails, saying what to
// install; it does not skip.
func TestMySQLMissing(t *testing.T) {
	out := helper(t, "mysql-db", []string{testutil.EnvMySQLDSN + "=root@tcp(" + testutil.RefusedAddr(t) + ")/"})
	assert.Contains(t, out, "--- FAIL: TestHelperProcess")
	assert.Contains(t, out, "no MySQL")
	assert.Contains(t, out, "apt-get install mariadb-server")
	assert.NotContains(t, out, "SKIP")
}

// TestThrowawayPostgres exercises the last fallback of Postgres: a cluster
// made with initdb in a temp dir, started and stopped by localpg.
func TestThrowawayPostgres(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := localpg.Start(ctx)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, s.URL())
	require.NoError(t, err)
	var one int
	require.NoError(t, conn.QueryRow(ctx, "SELECT 1").Scan(&one))
	assert.Equal(t, 1, one)
	require.NoError(t, conn.Close(ctx))
	s.Stop()
	_, err = pgx.Connect(ctx, s.URL())
	assert.Error(t, err, "a stopped throwaway server must be gone")
}

func TestSentinelFailover(t *testing.T) {
	set := redistest.Sentinel(t)
	ctx := context.Background()
	before, err := set.Primary(ctx)
	require.NoError(t, err)
	assert.Equal(t, set.Servers[0].Addr(), before)
	c := set.Client()
	defer c.Close()
	require.NoError(t, c.Set(ctx, "k", "v", 0).Err())
	require.NoError(t, set.Failover(ctx, 15*time.Second))
	after, err := set.Primary(ctx)
	require.NoError(t, err)
	assert.Equal(t, set.Servers[1].Addr(), after)
	assert.Equal(t, set.Servers[1], set.Server(after))
	require.Eventually(t, func() bool { return c.Set(ctx, "k2", "v", 0).Err() == nil }, 10*time.Second, 20*time.Millisecond,
		"the failover client writes to the new primary")
}
