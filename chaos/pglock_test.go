package chaos_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/chaoskit"
	"github.com/redfence/redfence/internal/localpg"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

// TestChaosPGLock runs the register workload with the lock itself on
// PostgreSQL (pgdriver), on a throwaway server of its own: killed client
// connections, the server paused past the lease and restarted, client
// latency and partitions, and clients stalled past the lease. The checks
// are the others': a linearizable register, tokens accepted in increasing
// order.
func TestChaosPGLock(t *testing.T) {
	w := newWorld(t, "pglock")
	pgLock(t, w)
	w.Run(20 * time.Second)
	w.Check("pglock")
}

// pgLock gives w its clients' Lockers over pgdriver, each through its own
// proxy to one throwaway PostgreSQL, and the faults of that setup.
func pgLock(t *testing.T, w *chaoskit.World) {
	srv, admin := pgServer(t)
	pgLockOn(t, w, srv, admin)
}

// pgServer starts a throwaway PostgreSQL with pgdriver's tables, and a
// pool to it that no fault goes through (it injects the kills).
func pgServer(t *testing.T) (*localpg.Server, *pgxpool.Pool) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	srv, err := localpg.Start(ctx)
	require.NoError(t, err, localpg.Install)
	t.Cleanup(srv.Stop)
	admin, err := pgxpool.New(ctx, srv.URL())
	require.NoError(t, err)
	t.Cleanup(admin.Close)
	d, err := pgdriver.New(admin)
	require.NoError(t, err)
	require.NoError(t, d.Migrate(ctx))
	return srv, admin
}

// pgLockOn is pgLock on srv. A client's pool (each through its proxy) is
// also given to setup, when there is one, before its Locker is made.
func pgLockOn(t *testing.T, w *chaoskit.World, srv *localpg.Server, admin *pgxpool.Pool, setup ...func(i int, pool *pgxpool.Pool, d *pgdriver.Driver)) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	proxies := make([]*testutil.TCPProxy, chaoskit.Clients)
	for i := range chaoskit.Clients {
		proxies[i] = testutil.Proxy(t, srv.Addr())
		cfg, err := pgxpool.ParseConfig("postgres://postgres@" + proxies[i].Addr() + "/postgres?sslmode=disable")
		require.NoError(t, err)
		cfg.ConnConfig.ConnectTimeout = 200 * time.Millisecond
		// A client cut off inside a transaction (LockTx, Check) keeps its
		// row locks until the server ends its session: this setting.
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = "3s"
		pool, err := pgxpool.NewWithConfig(ctx, cfg)
		require.NoError(t, err)
		d, err := pgdriver.New(pool)
		require.NoError(t, err)
		for _, f := range setup {
			f(i, pool, d)
		}
		l, err := mutex.New(d)
		require.NoError(t, err)
		w.Lockers = append(w.Lockers, l)
		t.Cleanup(func() { _ = l.Close(); pool.Close() })
		p := proxies[i]
		w.Isolate = append(w.Isolate, func() func() { p.BlackHole(); return p.Heal })
	}
	w.Faults = []chaoskit.Fault{
		{Name: "postgres paused past the lease", Apply: func(*rand.Rand) func() { srv.Pause(); return srv.Resume }},
		{Name: "postgres restarted", Apply: func(*rand.Rand) func() {
			rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := srv.Restart(rctx); err != nil {
				t.Errorf("restart: %v", err)
			}
			admin.Reset() // its connections died with the server
			return func() {}
		}},
		{Name: "client connections killed", Apply: func(*rand.Rand) func() {
			kctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_, _ = admin.Exec(kctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()`)
			return func() {}
		}},
		{Name: "client latency", Apply: func(rng *rand.Rand) func() {
			p := proxies[rng.IntN(chaoskit.Clients)]
			p.SetLatency(time.Duration(20+rng.IntN(80)) * time.Millisecond)
			return func() { p.SetLatency(0) }
		}},
		{Name: "client partitioned (black hole)", Apply: func(rng *rand.Rand) func() {
			p := proxies[rng.IntN(chaoskit.Clients)]
			p.BlackHole()
			return p.Heal
		}},
		w.StallFault(),
	}
}
