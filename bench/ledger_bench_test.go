package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/benchkit"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// Ledger workload sizes: the targets in bench/README.md are stated for these.
const (
	ledgerWorkers   = 8
	ledgerAccounts  = 32
	ledgerPerWorker = 8 // transfers per worker per block
)

// BenchmarkLedgerPaired is examples/ledger's transfer, done right: lock
// both accounts (per-account: LockAll of "account:<from>" and
// "account:<to>"; global: Lock of one key "ledger", as a ledger with one
// lock does), read both balances, write both back in one transaction
// fenced on every key held (fenced.Guard.DoAll), unlock. ledgerWorkers
// workers, each with its own Locker and client as separate processes
// would have, move money among ledgerAccounts accounts, the two sides in
// alternating blocks (benchkit.Alternate) on the same Redis and
// PostgreSQL, so their ratio is taken over the same seconds.
//
// ns/op and ref-ns/op are wall time per transfer (the inverse of the
// throughput), x-ref their ratio: the global lock's throughput is 1/x-ref
// of per-account's. tps and ref-tps are transfers per second; p99-ms and
// ref-p99-ms a transfer's 99th percentile latency, lock wait included;
// wait-ms the mean wait for the locks. client-, redis- and pg-cpu-us are
// the CPU time per transfer of the workers' process, the redis-server and
// PostgreSQL (ledgerCPU), cpu-us their sum, host-idle-% the host's idle
// share over the side's blocks: on two cores, 2 s / cpu-us is the most
// transfers per second any locking can reach.
func BenchmarkLedgerPaired(b *testing.B) {
	ctx := context.Background()
	pool, guard, lockers, meter := ledgerSetup(ctx, b)
	name := fmt.Sprintf("w%d-a%d/per-account-vs-global", ledgerWorkers, ledgerAccounts)
	b.Run(name, func(b *testing.B) {
		sub := &ledgerSide{pool: pool, guard: guard, lockers: lockers, meter: meter}
		ref := &ledgerSide{pool: pool, guard: guard, lockers: lockers, meter: meter, global: true}
		cycles := benchkit.Alternate(b, ledgerWorkers*ledgerPerWorker,
			func() time.Duration { return sub.block(ctx, b) },
			func() time.Duration { return ref.block(ctx, b) })
		sub.report(b, cycles, "")
		ref.report(b, cycles, "ref-")
	})
}

// ledgerSide is one side of the pair: its lock keys, and what it measured.
type ledgerSide struct {
	pool    *pgxpool.Pool
	guard   *fenced.Guard
	lockers []*mutex.Locker
	meter   *ledgerCPU
	global  bool
	// xfer, when set, is the side's transfer for worker w instead of the
	// Redis-locked one (the PostgreSQL-only sides).
	xfer func(ctx context.Context, w, from, to int) (time.Duration, error)

	mu    sync.Mutex
	lats  []time.Duration
	waits []time.Duration
	wall  time.Duration
	cpu   ledgerCPUSample
	round uint64
}

// block runs ledgerPerWorker transfers on each worker at once and returns
// the wall time they took together.
func (s *ledgerSide) block(ctx context.Context, b *testing.B) time.Duration {
	s.round++
	cpu0 := s.meter.read(b)
	start := time.Now()
	var wg sync.WaitGroup
	for w, l := range s.lockers {
		rng := rand.New(rand.NewPCG(uint64(w), s.round))
		wg.Go(func() {
			lats := make([]time.Duration, 0, ledgerPerWorker)
			waits := make([]time.Duration, 0, ledgerPerWorker)
			for range ledgerPerWorker {
				from := rng.IntN(ledgerAccounts)
				to := (from + 1 + rng.IntN(ledgerAccounts-1)) % ledgerAccounts
				t0 := time.Now()
				var wait time.Duration
				var err error
				if s.xfer != nil {
					wait, err = s.xfer(ctx, w, from, to)
				} else {
					wait, err = s.transfer(ctx, l, from, to)
				}
				if err != nil {
					b.Error(err)
					return
				}
				lats = append(lats, time.Since(t0))
				waits = append(waits, wait)
			}
			s.mu.Lock()
			s.lats = append(s.lats, lats...)
			s.waits = append(s.waits, waits...)
			s.mu.Unlock()
		})
	}
	wg.Wait()
	d := time.Since(start)
	s.wall += d
	s.cpu = s.cpu.add(s.meter.read(b).sub(cpu0))
	return d
}

// transfer moves 1 from one account to the other under the side's locks
// and a fence on each key held, and returns how long it waited for the
// locks.
func (s *ledgerSide) transfer(ctx context.Context, l *mutex.Locker, from, to int) (wait time.Duration, err error) {
	keys := []string{"ledger"}
	if !s.global {
		keys = []string{fmt.Sprint("account:", from), fmt.Sprint("account:", to)}
	}
	t0 := time.Now()
	err = l.DoAll(ctx, keys, func(ctx context.Context, ls *mutex.Locks) error {
		wait = time.Since(t0)
		claims := make([]fenced.Claim, 0, len(keys))
		for _, k := range ls.Keys() {
			claims = append(claims, fenced.Claim{Resource: k, Token: ls.TokenOf(k)})
		}
		return ledgerWrite(ctx, s.pool, s.guard, from, to, claims)
	})
	return wait, err
}

// ledgerWrite is a transfer's PostgreSQL part: read both balances, write
// both back in one transaction fenced on claims.
func ledgerWrite(ctx context.Context, pool *pgxpool.Pool, guard *fenced.Guard, from, to int, claims []fenced.Claim) error {
	var fromBal, toBal int64
	err := pool.QueryRow(ctx, `SELECT (SELECT balance FROM bench_ledger WHERE id = $1), (SELECT balance FROM bench_ledger WHERE id = $2)`, from, to).Scan(&fromBal, &toBal)
	if err != nil {
		return err
	}
	return guard.DoAll(ctx, claims, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE bench_ledger SET balance = CASE id WHEN $1 THEN $2::bigint ELSE $3::bigint END WHERE id IN ($1, $4)`,
			from, fromBal-1, toBal+1, to)
		return err
	})
}

// report gives the side's transfers per second and p99 latency, its
// metrics' names prefixed by prefix.
func (s *ledgerSide) report(b *testing.B, cycles int, prefix string) {
	if len(s.lats) == 0 {
		return
	}
	slices.Sort(s.lats)
	p99 := s.lats[min(len(s.lats)-1, len(s.lats)*99/100)]
	b.ReportMetric(float64(p99.Microseconds())/1000, prefix+"p99-ms")
	var wait time.Duration
	for _, w := range s.waits {
		wait += w
	}
	b.ReportMetric(float64(wait.Microseconds())/1000/float64(len(s.waits)), prefix+"wait-ms")
	b.ReportMetric(float64(cycles)/s.wall.Seconds(), prefix+"tps")
	s.cpu.report(b, cycles, prefix)
}

// ledgerSetup starts the ledger benchmarks' Redis, makes the accounts'
// table and the fence in PostgreSQL, a Locker per worker and the CPU meter.
func ledgerSetup(ctx context.Context, b *testing.B) (*pgxpool.Pool, *fenced.Guard, []*mutex.Locker, *ledgerCPU) {
	_, srv := redistest.Redis(b)
	pool := ledgerPool(ctx, b)
	guard, err := fenced.New(pool)
	if err != nil {
		b.Fatal(err)
	}
	if err := guard.Migrate(ctx); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS bench_ledger (id int PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO bench_ledger SELECT g, 1000000 FROM generate_series(0, $1 - 1) g ON CONFLICT DO NOTHING`, ledgerAccounts); err != nil {
		b.Fatal(err)
	}
	lockers := make([]*mutex.Locker, ledgerWorkers)
	for i := range lockers {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr()})
		lockers[i] = newLocker(b, c)
		b.Cleanup(func() { _ = lockers[i].Close(); _ = c.Close() })
	}
	return pool, guard, lockers, newLedgerCPU(ctx, b, pool, srv.PID())
}

// ledgerPool is a pool of the package database with a connection for
// every worker, as ledgerWorkers processes would each have their own:
// pgxpool's default of four would let only four transfers hold a
// connection at once, a limit of the benchmark's, not of the locks.
func ledgerPool(ctx context.Context, b *testing.B) *pgxpool.Pool {
	cfg, err := pgxpool.ParseConfig(testutil.PostgresURL(b))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = ledgerWorkers
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}
