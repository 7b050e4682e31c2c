// Command pglock shows PostgreSQL as the lock itself, with nothing else
// running: no Redis, no etcd.
//
// Two replicas (two Lockers over pools of their own, as two processes
// would have) deposit into one account in turn. Each deposit takes the
// lock "account:1" from pgdriver, checks the hold first in its write
// transaction (Driver.Check) and adds 1 to the balance: the check and the
// write commit together or not at all, and while that transaction is open
// no other replica can take the key.
//
// Then one replica stalls with the lock (its renewal off, as a long GC
// pause would leave it) until its lease has run out on the database's
// clock and the other replica has taken the key. Its write, checked in its
// own transaction, is refused with pgdriver.ErrNotHeld; the new holder's
// commits. The balance is exactly the deposits that committed.
//
//	go run ./examples/pglock
//
// DATABASE_URL selects a real server (a throwaway local cluster
// otherwise); the demo works in its own schema, redfence_pglock_demo,
// which it drops and recreates.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/examples/embedded"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

const (
	schema  = "redfence_pglock_demo"
	account = "account:1"
)

type options struct {
	dbURL    string
	deposits int // per replica
	ttl      time.Duration
}

type result struct {
	committed     int   // deposits that committed
	balance       int64 // the account's balance at the end
	stalledToken  int64
	nextToken     int64
	stalledErr    error // what the stalled replica's checked write met
	tokensOrdered bool  // every committed deposit's token above the one before
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := options{dbURL: os.Getenv("DATABASE_URL"), deposits: 20, ttl: 500 * time.Millisecond}
	if _, err := run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "pglock:", err)
		os.Exit(1)
	}
}

// replica is one process's view: its pool, its driver and its Locker.
type replica struct {
	pool   *pgxpool.Pool
	driver *pgdriver.Driver
	locker *mutex.Locker
}

func newReplica(ctx context.Context, url string) (*replica, error) {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, err
	}
	d, err := pgdriver.New(pool, pgdriver.WithSchema(schema))
	if err == nil {
		var l *mutex.Locker
		if l, err = mutex.New(d); err == nil {
			return &replica{pool: pool, driver: d, locker: l}, nil
		}
	}
	pool.Close()
	return nil, err
}

func (r *replica) close() {
	_ = r.locker.Close()
	r.pool.Close()
}

// deposit adds 1 to the balance in a transaction that first checks h: the
// lock and the fence are one.
func (r *replica) deposit(ctx context.Context, h pgdriver.Held) error {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if err := r.driver.Check(ctx, tx, h); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE `+schema+`.accounts SET balance = balance + 1, token = $1 WHERE id = $2`, h.Token(), account); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func run(ctx context.Context, out io.Writer, o options) (result, error) {
	var res result
	url, where, stopDB, err := embedded.Postgres(ctx, o.dbURL, "pglock")
	if err != nil {
		return res, err
	}
	defer stopDB()
	fmt.Fprintf(out, "PostgreSQL: %s\n", where)
	if err := prepare(ctx, url); err != nil {
		return res, err
	}
	var replicas [2]*replica
	for i := range replicas {
		if replicas[i], err = newReplica(ctx, url); err != nil {
			return res, err
		}
		defer replicas[i].close()
	}

	// The replicas take turns: a deposit's token is checked in its own
	// transaction, so the account's last token only grows.
	var mu sync.Mutex
	var last int64
	res.tokensOrdered = true
	errs := make(chan error, len(replicas))
	var wg sync.WaitGroup
	for _, r := range replicas {
		wg.Go(func() {
			for range o.deposits {
				lk, err := r.locker.Lock(ctx, account, mutex.WithTTL(o.ttl))
				if err != nil {
					errs <- err
					return
				}
				err = r.deposit(ctx, lk)
				if err == nil {
					mu.Lock()
					res.committed++
					res.tokensOrdered = res.tokensOrdered && lk.Token() > last
					last = lk.Token()
					mu.Unlock()
				}
				if rerr := lk.Release(ctx); err == nil {
					err = rerr
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	fmt.Fprintf(out, "%d replicas made %d checked deposits in turn, tokens increasing: %v\n", len(replicas), res.committed, res.tokensOrdered)

	// The stall: replica 0 holds the key without renewing it; replica 1's
	// Lock returns once that lease has run out on the database's clock.
	stalled, err := replicas[0].locker.Lock(ctx, account, mutex.WithTTL(o.ttl), mutex.WithAutoRenew(false))
	if err != nil {
		return res, err
	}
	next, err := replicas[1].locker.Lock(ctx, account, mutex.WithTTL(o.ttl))
	if err != nil {
		return res, err
	}
	res.stalledToken, res.nextToken = stalled.Token(), next.Token()
	fmt.Fprintf(out, "replica 0 stalled with token %d; its lease ran out and replica 1 took the key with token %d\n", res.stalledToken, res.nextToken)
	res.stalledErr = replicas[0].deposit(ctx, stalled)
	if !errors.Is(res.stalledErr, pgdriver.ErrNotHeld) {
		return res, fmt.Errorf("the stalled replica's write was not refused: %v", res.stalledErr)
	}
	fmt.Fprintf(out, "replica 0 wakes and writes: refused inside its own transaction (%v)\n", res.stalledErr)
	if err := replicas[1].deposit(ctx, next); err != nil {
		return res, err
	}
	res.committed++
	fmt.Fprintln(out, "replica 1 writes: committed")
	if err := next.Release(ctx); err != nil {
		return res, err
	}
	_ = stalled.Release(ctx) // already lost: ErrNotHeld, nothing to undo

	if err := replicas[0].pool.QueryRow(ctx, `SELECT balance FROM `+schema+`.accounts WHERE id = $1`, account).Scan(&res.balance); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "balance: %d, deposits committed: %d\n", res.balance, res.committed)
	return res, nil
}

// prepare recreates the demo's schema, the lease table (Migrate) and the
// account.
func prepare(ctx context.Context, url string) error {
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
		return err
	}
	d, err := pgdriver.New(pool, pgdriver.WithSchema(schema))
	if err != nil {
		return err
	}
	if err := d.Migrate(ctx); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `CREATE TABLE `+schema+`.accounts (id text PRIMARY KEY, balance bigint NOT NULL, token bigint NOT NULL);
		INSERT INTO `+schema+`.accounts VALUES ('`+account+`', 0, 0)`)
	return err
}
