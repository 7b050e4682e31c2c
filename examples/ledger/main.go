// Command ledger shows why a lock needs a fence.
//
// Workers move money between accounts in PostgreSQL, each transfer under a
// redfence mutex: read two balances, compute, write them back. One worker
// stalls while holding the lock (a simulated GC pause) until its lease has
// run out and the other workers, done, have changed its accounts; then it wakes
// and writes balances computed from what it read before the pause. With
// fencing (the default) its write carries its lock's token, fenced.Guard sees
// a newer token already accepted and rejects it: the total is unchanged.
// With -fencing=false the stale write lands and money appears or vanishes.
//
//	go run ./examples/ledger                  # throwaway PostgreSQL, embedded Redis
//	go run ./examples/ledger -fencing=false   # the corruption the fence prevents
//
// DATABASE_URL and REDIS_URL select real servers; the demo then works in its
// own schema, redfence_ledger_demo, which it drops and recreates.
//
// The lock and the fence are in this file (transfer); redis.go and
// postgres.go only find the demo its servers.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
)

type options struct {
	fencing   bool
	workers   int
	accounts  int
	transfers int // per worker
	stalls    int // workers that stall once
	ttl       time.Duration
	dbURL     string
	redisURL  string
}

type result struct {
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
	flag.IntVar(&o.workers, "workers", 4, "concurrent workers, each with its own Locker")
	flag.IntVar(&o.accounts, "accounts", 5, "accounts in the ledger")
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
	// Redis first: its check takes milliseconds, a throwaway PostgreSQL seconds.
	newClient, redisWhere, stopRedis, err := newRedis(ctx, o.redisURL)
	if err != nil {
		return result{}, err
	}
	defer stopRedis()
	dbURL, dbWhere, stopDB, err := newPostgres(ctx, o.dbURL)
	if err != nil {
		return result{}, err
	}
	defer stopDB()

	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return result{}, err
	}
	defer pool.Close()
	if err := setup(ctx, pool, o.accounts); err != nil {
		return result{}, fmt.Errorf("setup: %w", err)
	}
	guard := fenced.New(pool, fenced.WithTable(schema+".fences"))
	if err := guard.Migrate(ctx); err != nil {
		return result{}, err
	}

	fmt.Fprintf(out, "ledger demo: %d workers × %d transfers between %d accounts of %d, lock lease %v;\n",
		o.workers, o.transfers, o.accounts, initial, o.ttl)
	fmt.Fprintf(out, "%d of them stall once while holding the lock (a simulated GC pause). Fencing: %v.\n", o.stalls, onOff(o.fencing))
	fmt.Fprintf(out, "PostgreSQL: %s. Redis: %s.\n\n", dbWhere, redisWhere)

	var res result
	res.totalBefore, err = total(ctx, pool)
	if err != nil {
		return result{}, err
	}
	d := &ledgerRun{o: o, pool: pool, guard: guard, out: out, res: &res}
	d.running.Add(o.workers)
	var wg sync.WaitGroup
	errs := make([]error, o.workers)
	for w := range o.workers {
		c := newClient()
		l := mutex.New(c)
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

	conclude(out, o, res)
	return res, nil
}

// conclude prints what res shows, computed from it alone.
func conclude(out io.Writer, o options, res result) {
	fmt.Fprintf(out, "\ntransfers committed:          %d\n", res.committed)
	fmt.Fprintf(out, "stale writes rejected (fence): %d\n", res.staleRejected)
	fmt.Fprintf(out, "stale writes accepted:        %d\n", res.staleAccepted)
	fmt.Fprintf(out, "total balance: %d before, %d after: ", res.totalBefore, res.totalAfter)
	switch {
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
	out   io.Writer
	res   *result
	mu    sync.Mutex // serialises output lines

	// running counts the workers still transferring under the lock: each
	// leaves it when it finishes or stalls. A stalled worker writes only
	// once it is zero, one stalled worker at a time (staleMu), so that no
	// correct transfer can overwrite its stale write and undo the damage
	// the demo is about.
	running sync.WaitGroup
	staleMu sync.Mutex
}

// worker runs o.transfers transfers; workers below o.stalls stall once, in
// the middle of their run.
func (d *ledgerRun) worker(ctx context.Context, w int, l *mutex.Locker) error {
	leave := sync.OnceFunc(d.running.Done)
	defer leave()
	rng := rand.New(rand.NewPCG(uint64(w), 42))
	for i := range d.o.transfers {
		stall := w < d.o.stalls && i == d.o.transfers/2
		from := rng.IntN(d.o.accounts)
		to := (from + 1 + rng.IntN(d.o.accounts-1)) % d.o.accounts
		amount := int64(1 + rng.IntN(50))
		if err := d.transfer(ctx, w, l, from, to, amount, stall, leave); err != nil {
			return fmt.Errorf("worker %d: %w", w, err)
		}
	}
	return nil
}

// transfer is a read-modify-write under the ledger's lock: read both
// balances, compute, write both back as absolute values. Correct while the
// lock holds; a lost update when it does not, unless the fence stops it.
func (d *ledgerRun) transfer(ctx context.Context, w int, l *mutex.Locker, from, to int, amount int64, stall bool, leave func()) error {
	// A real GC pause stops the whole process, renewal included. Here only
	// this goroutine sleeps, so the stalling transfer runs without renewal.
	lk, err := l.Lock(ctx, "ledger", mutex.WithTTL(d.o.ttl), mutex.WithAutoRenew(!stall))
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		_ = lk.Unlock(uctx) // ErrNotHeld after the stall: the lock was long gone
	}()

	var fromBal, toBal int64
	err = d.pool.QueryRow(ctx, `SELECT (SELECT balance FROM `+schema+`.accounts WHERE id = $1), (SELECT balance FROM `+schema+`.accounts WHERE id = $2)`, from, to).Scan(&fromBal, &toBal)
	if err != nil {
		return err
	}
	if stall {
		d.say("worker %d holds the lock (token %d) and stalls...", w, lk.Token())
		// The pause lasts until the lease is over and the other workers
		// have finished (or stalled too), having changed what we read: the
		// two balances no longer add up to what they did, so writing ours
		// back creates or destroys money, and nobody overwrites it.
		<-lk.Context().Done()
		leave()
		d.running.Wait()
		d.staleMu.Lock()
		defer d.staleMu.Unlock()
		var sum int64
		err := d.pool.QueryRow(ctx, `SELECT sum(balance)::bigint FROM `+schema+`.accounts WHERE id IN ($1, $2)`, from, to).Scan(&sum)
		if err != nil {
			return err
		}
		if sum == fromBal+toBal {
			return errors.New("nobody else changed the stalled worker's accounts")
		}
		d.say("worker %d wakes up after its lease ended (%v) and writes from its stale read", w, context.Cause(lk.Context()))
	}
	if amount > fromBal {
		amount = fromBal
	}
	write := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE `+schema+`.accounts SET balance = CASE id WHEN $1 THEN $2::bigint ELSE $3::bigint END WHERE id IN ($1, $4)`,
			from, fromBal-amount, toBal+amount, to)
		return err
	}
	if d.o.fencing {
		err = d.guard.Do(ctx, "ledger", lk.Token(), write)
	} else {
		err = pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error { return write(ctx, tx) })
	}
	var staleErr *fenced.StaleTokenError
	switch {
	case errors.As(err, &staleErr):
		atomic.AddInt64(&d.res.staleRejected, 1)
		d.say("  rejected by the fence: token %d < %d already written", staleErr.Token, staleErr.Highest)
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

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}
