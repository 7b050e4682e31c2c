// Command ledger shows why a lock needs a fence, and what locking per
// account buys over one lock for the whole ledger.
//
// Workers move money between accounts in PostgreSQL: read two balances,
// compute, write them back. Each transfer locks its two accounts with one
// mutex.Locker.LockAll ("account:3", "account:7"; taken in one order every
// worker shares, so opposite transfers never deadlock) and writes under
// fenced.Guard.DoAll, one transaction fenced on both accounts with each
// one's token. With -global every transfer takes the one key "ledger"
// instead, as a ledger with a single lock does: transfers run one at a
// time. Both modes print the transfers per second they reached, counted
// until every worker has finished or stalled. The embedded Redis runs its
// scripts in the demo's own process and narrows the gap; with REDIS_URL and
// a real server per-account locking ran about twice the global lock's rate
// on two cores (bench/ measures it properly: BenchmarkLedger).
//
// One worker stalls while holding its locks (a simulated GC pause) until
// its lease has run out and the other workers, done, have changed its
// accounts; then it wakes and writes balances computed from what it read
// before the pause. With fencing (the default) its write carries its
// tokens, the fence sees a newer token already accepted on an account and
// rejects the whole transaction: the total is unchanged. With
// -fencing=false the stale write lands and money appears or vanishes.
//
// With -postgres there is no Redis: each transfer takes its accounts' locks
// in its own transaction (pgdriver's QueueLockTx, sent with the read), so
// the lock, its check and the write are one commit. A stalling worker then
// holds its accounts' rows: the transfers that need them wait for it, and
// no write can be stale.
//
//	go run ./examples/ledger                  # throwaway PostgreSQL, embedded Redis
//	go run ./examples/ledger -global          # one lock for the ledger: compare transfers/s
//	go run ./examples/ledger -fencing=false   # the corruption the fence prevents
//	go run ./examples/ledger -postgres        # the locks in PostgreSQL itself
//
// DATABASE_URL and REDIS_URL select real servers; the demo then works in its
// own schema, redfence_ledger_demo, which it drops and recreates.
//
// The lock and the fence are in this file (transfer); package
// examples/embedded only finds the demo its servers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/examples/embedded"
	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
	"github.com/redfence/redfence/redis/redisdriver"
)

type options struct {
	fencing   bool
	global    bool // one lock, "ledger", for every transfer
	postgres  bool // the locks in each transfer's transaction (pgdriver), no Redis
	workers   int
	accounts  int
	transfers int // per worker
	stalls    int // workers that stall once
	ttl       time.Duration
	dbURL     string
	redisURL  string
}

type result struct {
	perSecond     float64 // transfers committed while every worker ran, per second
	committed     int64
	staleRejected int64
	staleAccepted int64
	totalBefore   int64
	totalAfter    int64
}

const (
	schema  = "redfence_ledger_demo"
	initial = 1000 // each account's opening balance
)

func main() {
	o := options{}
	flag.BoolVar(&o.fencing, "fencing", true, "pass lock tokens to fenced.Guard; false shows the corruption it prevents")
	flag.BoolVar(&o.global, "global", false, "one lock for the whole ledger instead of one per account")
	flag.BoolVar(&o.postgres, "postgres", false, "take the locks in each transfer's own PostgreSQL transaction (pgdriver), no Redis")
	flag.IntVar(&o.workers, "workers", 8, "concurrent workers, each with its own Locker")
	flag.IntVar(&o.accounts, "accounts", 32, "accounts in the ledger")
	flag.IntVar(&o.transfers, "transfers", 50, "transfers per worker")
	flag.IntVar(&o.stalls, "stalls", 2, "workers that stall once past their lease")
	flag.DurationVar(&o.ttl, "ttl", 300*time.Millisecond, "lock lease")
	flag.Parse()
	o.dbURL, o.redisURL = os.Getenv("DATABASE_URL"), os.Getenv("REDIS_URL")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := run(ctx, os.Stdout, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
		os.Exit(1)
	}
	if o.fencing && res.totalAfter != res.totalBefore {
		os.Exit(2) // never expected: the fence failed
	}
}

func run(ctx context.Context, out io.Writer, o options) (result, error) {
	if o.workers < 2 || o.accounts < 2 || o.transfers < 1 || o.stalls < 1 || o.stalls >= o.workers {
		return result{}, errors.New("need at least 2 workers, 2 accounts, 1 transfer, and 1 to workers-1 stalls")
	}
	if o.postgres && !o.fencing {
		return result{}, errors.New("-postgres has no fence to turn off: the lock is the write's transaction")
	}
	newClient, redisWhere := func() redis.UniversalClient { return nil }, "not used"
	if !o.postgres {
		// Redis first: its check takes milliseconds, a throwaway PostgreSQL seconds.
		var stopRedis func()
		var err error
		newClient, redisWhere, stopRedis, err = embedded.Redis(ctx, o.redisURL)
		if err != nil {
			return result{}, err
		}
		defer stopRedis()
	}
	dbURL, dbWhere, stopDB, err := embedded.Postgres(ctx, o.dbURL, "ledger")
	if err != nil {
		return result{}, err
	}
	defer stopDB()

	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return result{}, err
	}
	// A connection per worker, as separate processes would have: pgxpool's
	// default (4 on two cores) would cap the transfers in flight, not the locks.
	cfg.MaxConns = int32(max(o.workers+1, 4))
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	if err := setup(ctx, pool, o.accounts); err != nil {
		return result{}, fmt.Errorf("setup: %w", err)
	}
	guard, err := fenced.New(pool, fenced.WithTable(schema+".fences"))
	if err != nil {
		return result{}, err
	}
	if err := guard.Migrate(ctx); err != nil {
		return result{}, err
	}
	var pg *pgdriver.Driver
	if o.postgres {
		if pg, err = pgdriver.New(pool, pgdriver.WithSchema(schema)); err != nil {
			return result{}, err
		}
		if err := pg.Migrate(ctx); err != nil {
			return result{}, err
		}
	}

	fmt.Fprintf(out, "ledger demo: %d workers × %d transfers between %d accounts of %d, lock lease %v;\n",
		o.workers, o.transfers, o.accounts, initial, o.ttl)
	fmt.Fprintf(out, "Locks: %s%s. %d of the workers stall once while holding them (a simulated GC pause). Fencing: %v.\n",
		lockMode(o.global), lockStore(o.postgres), o.stalls, fencing(o))
	fmt.Fprintf(out, "PostgreSQL: %s. Redis: %s.\n\n", dbWhere, redisWhere)

	var res result
	res.totalBefore, err = total(ctx, pool)
	if err != nil {
		return result{}, err
	}
	d := &ledgerRun{o: o, pool: pool, guard: guard, pg: pg, out: out, res: &res}
	d.running.Add(o.workers)
	d.read.Add(min(o.stalls, o.workers))
	start := time.Now()
	go func() {
		// The rate counts the transfers done while workers ran, not the
		// stalled workers' wait after them.
		d.running.Wait()
		d.rate.Store(math.Float64bits(float64(atomic.LoadInt64(&res.committed)) / time.Since(start).Seconds()))
	}()
	var wg sync.WaitGroup
	errs := make([]error, o.workers)
	for w := range o.workers {
		if o.postgres {
			wg.Go(func() { errs[w] = d.worker(ctx, w, nil) })
			continue
		}
		c := newClient()
		l, err := newLocker(c)
		if err != nil {
			_ = c.Close()
			errs[w] = err
			continue
		}
		wg.Go(func() {
			defer func() { _ = l.Close(); _ = c.Close() }()
			errs[w] = d.worker(ctx, w, l)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return result{}, err
	}
	res.totalAfter, err = total(ctx, pool)
	if err != nil {
		return result{}, err
	}
	res.perSecond = math.Float64frombits(d.rate.Load())

	conclude(out, o, res)
	return res, nil
}

// newLocker is a worker's Locker: a redisdriver over its client, which
// stays the caller's to close.
func newLocker(c redis.UniversalClient) (*mutex.Locker, error) {
	drv, err := redisdriver.New(c)
	if err != nil {
		return nil, err
	}
	l, err := mutex.New(drv)
	if err != nil {
		_ = drv.Close()
		return nil, err
	}
	return l, nil
}

// conclude prints what res shows, computed from it alone.
func conclude(out io.Writer, o options, res result) {
	fmt.Fprintf(out, "\nthroughput (%s): %.0f transfers/s while the workers ran", lockMode(o.global), res.perSecond)
	if o.global {
		fmt.Fprintln(out, "; without -global, per-account locks let transfers of other accounts run at once.")
	} else {
		fmt.Fprintln(out, "; compare with -global, one lock for the ledger.")
	}
	fmt.Fprintf(out, "transfers committed:          %d\n", res.committed)
	fmt.Fprintf(out, "stale writes rejected (fence): %d\n", res.staleRejected)
	fmt.Fprintf(out, "stale writes accepted:        %d\n", res.staleAccepted)
	fmt.Fprintf(out, "total balance: %d before, %d after: ", res.totalBefore, res.totalAfter)
	switch {
	case res.totalAfter == res.totalBefore && o.postgres:
		fmt.Fprintln(out, "the invariant holds; the stalled workers held their rows, so nothing they wrote was stale.")
	case res.totalAfter == res.totalBefore:
		fmt.Fprintln(out, "the invariant holds.")
	case o.fencing:
		fmt.Fprintf(out, "VIOLATED: %+d created or destroyed although fencing was on.\n", res.totalAfter-res.totalBefore)
	default:
		fmt.Fprintf(out, "VIOLATED: %+d created or destroyed by stale writes.\n", res.totalAfter-res.totalBefore)
		fmt.Fprintln(out, "The lock alone could not stop a holder that paused past its lease; run with -fencing=true.")
	}
}

type ledgerRun struct {
	o     options
	pool  *pgxpool.Pool
	guard *fenced.Guard
	pg    *pgdriver.Driver // -postgres: the locks
	out   io.Writer
	res   *result
	mu    sync.Mutex // serialises output lines

	// running counts the workers still transferring under the lock: each
	// leaves it when it finishes or stalls. A stalled worker writes only
	// once it is zero, one stalled worker at a time (staleMu), so that no
	// correct transfer can overwrite its stale write and undo the damage
	// the demo is about.
	running sync.WaitGroup
	// read is done once every stalling worker has read its balances (or
	// ended): the others make the second half of their transfers after it,
	// so someone always changes what a stalled worker read.
	read    sync.WaitGroup
	staleMu sync.Mutex
	rate    atomic.Uint64 // perSecond's bits, once running is zero
}

// worker runs o.transfers transfers; workers below o.stalls stall once, in
// the middle of their run.
func (d *ledgerRun) worker(ctx context.Context, w int, l *mutex.Locker) error {
	leave := sync.OnceFunc(d.running.Done)
	defer leave()
	read := func() {}
	if w < d.o.stalls {
		read = sync.OnceFunc(d.read.Done)
		defer read()
	}
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	for i := range d.o.transfers {
		stall := w < d.o.stalls && i == d.o.transfers/2
		if w >= d.o.stalls && i == d.o.transfers/2 {
			d.read.Wait()
		}
		from := rng.IntN(d.o.accounts)
		to := (from + 1 + rng.IntN(d.o.accounts-1)) % d.o.accounts
		amount := int64(1 + rng.IntN(50))
		if err := d.transfer(ctx, w, l, from, to, amount, stall, leave, read); err != nil {
			return fmt.Errorf("worker %d: %w", w, err)
		}
	}
	return nil
}

// transfer is a read-modify-write under the accounts' locks: read both
// balances, compute, write both back as absolute values. Correct while the
// locks hold; a lost update when they do not, unless the fence stops it.
func (d *ledgerRun) transfer(ctx context.Context, w int, l *mutex.Locker, from, to int, amount int64, stall bool, leave, read func()) error {
	if d.pg != nil {
		return d.transferInTx(ctx, w, from, to, amount, stall, leave, read)
	}
	// A real GC pause stops the whole process, renewal included. Here only
	// this goroutine sleeps, so the stalling transfer runs without renewal.
	ls, err := l.LockAll(ctx, d.keys(from, to), mutex.WithTTL(d.o.ttl), mutex.WithAutoRenew(!stall))
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = ls.Release(uctx) // ErrNotHeld after the stall: the locks were long gone
	}()

	var fromBal, toBal int64
	err = d.pool.QueryRow(ctx, readBoth, from, to).Scan(&fromBal, &toBal)
	if err != nil {
		return err
	}
	if stall {
		read()
		if err := d.stallPastLease(ctx, w, ls, from, to, fromBal+toBal, leave); err != nil {
			return err
		}
		defer d.staleMu.Unlock()
	}
	amount = min(amount, fromBal)
	write := func(ctx context.Context, tx pgx.Tx) error {
		return writeBoth(ctx, tx, from, to, fromBal-amount, toBal+amount)
	}
	if d.o.fencing {
		err = d.guard.DoAll(ctx, claims(ls), write)
	} else {
		err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return write(ctx, tx) })
	}
	var staleErr *fenced.StaleTokenError
	switch {
	case errors.As(err, &staleErr):
		atomic.AddInt64(&d.res.staleRejected, 1)
		d.say("  rejected by the fence: %s token %d < %d already written", staleErr.Resource, staleErr.Token, staleErr.Highest)
		return nil
	case err != nil:
		return err
	}
	atomic.AddInt64(&d.res.committed, 1)
	if stall {
		atomic.AddInt64(&d.res.staleAccepted, 1)
		d.say("  accepted: the stale write overwrote newer balances")
	}
	return nil
}

// transferInTx is transfer with -postgres: the accounts' locks taken in
// the transfer's own transaction, queued with the read in one round trip.
// A stall inside it keeps the rows locked, so what it read stays true.
func (d *ledgerRun) transferInTx(ctx context.Context, w, from, to int, amount int64, stall bool, leave, read func()) error {
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var b pgx.Batch
		keys := d.keys(from, to)
		lk, err := d.pg.QueueLockTx(&b, keys...)
		if err != nil {
			return err
		}
		b.Queue(readBoth, from, to)
		br := tx.SendBatch(ctx, &b)
		defer func() { _ = br.Close() }()
		tokens, err := lk.Result(br)
		if err != nil {
			return err
		}
		var fromBal, toBal int64
		if err := br.QueryRow().Scan(&fromBal, &toBal); err != nil {
			return err
		}
		if err := br.Close(); err != nil {
			return err
		}
		if stall {
			read()
			leave() // as a Locker's stalled worker: the rate counts the others
			d.say("worker %d holds %s (tokens %v) in its transaction and stalls for %v...", w, strings.Join(keys, ", "), tokens, 2*d.o.ttl)
			select {
			case <-time.After(2 * d.o.ttl):
			case <-ctx.Done():
				return ctx.Err()
			}
			d.say("worker %d wakes up: the transfers of its accounts waited for it", w)
		}
		amount = min(amount, fromBal)
		return writeBoth(ctx, tx, from, to, fromBal-amount, toBal+amount)
	})
	if err != nil {
		return err
	}
	atomic.AddInt64(&d.res.committed, 1)
	return nil
}

// readBoth reads two accounts' balances; writeBoth writes them.
const readBoth = `SELECT (SELECT balance FROM ` + schema + `.accounts WHERE id = $1), (SELECT balance FROM ` + schema + `.accounts WHERE id = $2)`

func writeBoth(ctx context.Context, tx pgx.Tx, from, to int, fromBal, toBal int64) error {
	_, err := tx.Exec(ctx, `UPDATE `+schema+`.accounts SET balance = CASE id WHEN $1 THEN $2::bigint ELSE $3::bigint END WHERE id IN ($1, $4)`,
		from, fromBal, toBal, to)
	return err
}

// keys are the locks of a transfer: both accounts, or the ledger's one.
func (d *ledgerRun) keys(from, to int) []string {
	if d.o.global {
		return []string{"ledger"}
	}
	return []string{fmt.Sprint("account:", from), fmt.Sprint("account:", to)}
}

// claims fences the write on every key held, each with its own token.
func claims(ls *mutex.Locks) []fenced.Claim {
	var cs []fenced.Claim
	for _, k := range ls.Keys() {
		cs = append(cs, fenced.Claim{Resource: k, Token: ls.TokenOf(k)})
	}
	return cs
}

// stallPastLease is the pause: it lasts until the lease is over and the
// other workers have finished (or stalled too), having changed what we
// read: the two balances no longer add up to read, so writing ours back
// creates or destroys money, and nobody overwrites it. It returns holding
// staleMu, one stalled writer at a time.
func (d *ledgerRun) stallPastLease(ctx context.Context, w int, ls *mutex.Locks, from, to int, read int64, leave func()) error {
	d.say("worker %d holds %s (tokens %s) and stalls...", w, strings.Join(ls.Keys(), ", "), tokens(ls))
	<-ls.Context().Done()
	leave()
	d.running.Wait()
	d.staleMu.Lock()
	var sum int64
	err := d.pool.QueryRow(ctx, `SELECT sum(balance)::bigint FROM `+schema+`.accounts WHERE id IN ($1, $2)`, from, to).Scan(&sum)
	if err == nil && sum == read {
		err = errors.New("nobody else changed the stalled worker's accounts")
	}
	if err != nil {
		d.staleMu.Unlock()
		return err
	}
	d.say("worker %d wakes up after its lease ended (%v) and writes from its stale read", w, context.Cause(ls.Context()))
	return nil
}

func tokens(ls *mutex.Locks) string {
	var ts []string
	for _, k := range ls.Keys() {
		ts = append(ts, fmt.Sprint(ls.TokenOf(k)))
	}
	return strings.Join(ts, ", ")
}

func (d *ledgerRun) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, format+"\n", args...)
}

func setup(ctx context.Context, pool *pgxpool.Pool, accounts int) error {
	_, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`)
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE `+schema+`.accounts (id int PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `INSERT INTO `+schema+`.accounts SELECT g, $1 FROM generate_series(0, $2 - 1) g`, initial, accounts)
	return err
}

func total(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	var t int64
	err := pool.QueryRow(ctx, `SELECT sum(balance)::bigint FROM `+schema+`.accounts`).Scan(&t)
	return t, err
}

func lockMode(global bool) string {
	if global {
		return "one global lock"
	}
	return "per account"
}

func lockStore(postgres bool) string {
	if postgres {
		return ", in each transfer's PostgreSQL transaction"
	}
	return ", in Redis"
}

func fencing(o options) string {
	if o.postgres {
		return "the lock's own (its check is in the write's transaction)"
	}
	return onOff(o.fencing)
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
