package fencedtest

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
)

// A write made under a lock carries the lock's token, and the database
// records it in the write's own transaction.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	driver, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := mutex.New(driver) // the Locker owns the driver; rdb stays ours
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	guard, err := fenced.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Migrate(ctx); err != nil { // once, at start-up
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO accounts VALUES (42, 100) ON CONFLICT (id) DO UPDATE SET balance = 100`); err != nil {
		log.Fatal(err)
	}

	err = locker.Do(ctx, "account:42", func(ctx context.Context, lk *mutex.Lock) error {
		return guard.Do(ctx, "account:42", lk.Token(), func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 10 WHERE id = 42`)
			return err
		})
	})
	fmt.Println("err:", err)

	var balance int64
	if err := pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 42`).Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// err: <nil>
	// balance: 90
}

// The story fenced exists for: holder A stalls past its lease (a GC pause, a
// stalled VM), B takes the lock with a larger token and writes, and A's late
// write is refused before its function runs.
func Example_guardDo() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	newLocker := func() *mutex.Locker { // one per replica, each with its own driver
		driver, err := redisdriver.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		locker, err := mutex.New(driver)
		if err != nil {
			log.Fatal(err)
		}
		return locker
	}
	replicaA, replicaB := newLocker(), newLocker()
	defer replicaA.Close()
	defer replicaB.Close()

	guard, err := fenced.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	write := func(who string) func(ctx context.Context, tx pgx.Tx) error {
		return func(ctx context.Context, tx pgx.Tx) error {
			fmt.Println(who, "writes")
			return nil // in real code: tx.Exec(ctx, `UPDATE ...`)
		}
	}

	a, err := replicaA.Lock(ctx, "account:43", mutex.WithTTL(100*time.Millisecond), mutex.WithAutoRenew(false))
	if err != nil {
		log.Fatal(err)
	}
	<-a.Context().Done() // A stalls until its lease has run out

	b, err := replicaB.Lock(ctx, "account:43")
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Do(ctx, "account:43", b.Token(), write("B")); err != nil {
		log.Fatal(err)
	}
	_ = b.Release(ctx)

	// A wakes up and writes as if it still held the lock.
	err = guard.Do(ctx, "account:43", a.Token(), write("A"))
	var stale *fenced.StaleTokenError
	fmt.Println("A refused:", errors.As(err, &stale) && stale.Highest == b.Token())
	fmt.Println("stale token:", errors.Is(err, fenced.ErrStaleToken))
	// Output:
	// B writes
	// A refused: true
	// stale token: true
}

// Check is the fence for a transaction you run yourself; it must be the
// transaction's first statement. Tokens come from the lock (lk.Token());
// here two writers hold 8 and, later and stale, 7.
func Example_guardCheck() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()

	guard, err := fenced.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO accounts VALUES (44, 100) ON CONFLICT (id) DO UPDATE SET balance = 100`); err != nil {
		log.Fatal(err)
	}

	withdraw := func(token int64) error {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) // does nothing after Commit
		if err := guard.Check(ctx, tx, "account:44", token); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance - 10 WHERE id = 44`); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}

	fmt.Println("token 8:", withdraw(8))
	err = withdraw(7)
	var stale *fenced.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("token 7: stale, highest", stale.Highest)
	}

	var balance int64
	if err := pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 44`).Scan(&balance); err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", balance)
	// Output:
	// token 8: <nil>
	// token 7: stale, highest 8
	// balance: 90
}

// Protect makes the table itself refuse a writer that never heard of the
// lock, while the guard's callers write as before.
func Example_guardProtect() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	guard, err := fenced.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS ledger (id int PRIMARY KEY, amount bigint NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	// From your migrations: each row is fenced under 'ledger:' || id.
	if err := guard.Protect(ctx, "ledger", `'ledger:' || id`); err != nil {
		log.Fatal(err)
	}
	defer guard.Unprotect(context.Background(), "ledger")

	_, err = pool.Exec(ctx, `INSERT INTO ledger VALUES (7, 100)`) // no token
	fmt.Println("raw insert refused:", errors.Is(fenced.Refusal(err), fenced.ErrNoToken))

	err = guard.Do(ctx, "ledger:7", 1, func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO ledger VALUES (7, 100) ON CONFLICT (id) DO UPDATE SET amount = 100`)
		return err
	})
	fmt.Println("guarded insert:", err)
	// Output:
	// raw insert refused: true
	// guarded insert: <nil>
}

// A transfer writes two accounts, each under its own lock and token: one
// transaction fenced on both. A stale token for either refuses the whole
// transfer before it runs.
func Example_guardDoAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer rdb.Close()
	driver, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := mutex.New(driver) // the Locker owns the driver; rdb stays ours
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	guard, err := fenced.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	if err := guard.Migrate(ctx); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS accounts (id int PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		log.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO accounts VALUES (45, 100), (46, 100) ON CONFLICT (id) DO UPDATE SET balance = 100`); err != nil {
		log.Fatal(err)
	}
	transfer := func(ctx context.Context, tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE accounts SET balance = balance + CASE id WHEN 45 THEN -10 ELSE 10 END WHERE id IN (45, 46)`)
		return err
	}

	from, err := locker.Lock(ctx, "account:45")
	if err != nil {
		log.Fatal(err)
	}
	defer from.Release(ctx)
	to, err := locker.Lock(ctx, "account:46")
	if err != nil {
		log.Fatal(err)
	}
	defer to.Release(ctx)

	// Listed in any order: the guard records them in one, so that
	// transfers the other way never deadlock with this one.
	claims := []fenced.Claim{{Resource: "account:46", Token: to.Token()}, {Resource: "account:45", Token: from.Token()}}
	fmt.Println("transfer:", guard.DoAll(ctx, claims, transfer))

	// A holder of account:46 whose lock was since taken over holds a lower token.
	claims[0].Token = to.Token() - 1
	err = guard.DoAll(ctx, claims, transfer)
	var stale *fenced.StaleTokenError
	if errors.As(err, &stale) {
		fmt.Println("refused: stale token for", stale.Resource)
	}

	var balances string
	if err := pool.QueryRow(ctx, `SELECT string_agg(id || '=' || balance, ' ' ORDER BY id) FROM accounts WHERE id IN (45, 46)`).Scan(&balances); err != nil {
		log.Fatal(err)
	}
	fmt.Println(balances)
	// Output:
	// transfer: <nil>
	// refused: stale token for account:46
	// 45=90 46=110
}
