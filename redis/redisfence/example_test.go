package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redisfence"
)

// A write made under a lock carries the lock's token, and Redis records it
// in the write's own MULTI/EXEC. The balance's key carries the resource's
// hash tag, so that on a Cluster it shares the fence key's slot.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
	fence, err := redisfence.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	const resource = "account:42"
	balance := "balance:" + redisfence.Tag(resource) // balance:{account:42}
	if err := rdb.Set(ctx, balance, 100, 0).Err(); err != nil {
		log.Fatal(err)
	}

	err = locker.Do(ctx, resource, func(ctx context.Context, lk *mutex.Lock) error {
		return fence.Do(ctx, resource, lk.Token(), []string{balance},
			func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
				n, err := tx.Get(ctx, balance).Int64() // read through tx
				if err != nil {
					return err
				}
				if n < 10 {
					return errors.New("insufficient funds")
				}
				pipe.Set(ctx, balance, n-10, 0) // write through pipe
				return nil
			})
	})
	fmt.Println("err:", err)
	fmt.Println("balance:", rdb.Get(ctx, balance).Val())
	// Output:
	// err: <nil>
	// balance: 90
}

// The story a fence exists for: holder A stalls past its lease, B takes the
// lock with a larger token and writes, and A's late write is refused before
// its function runs.
func ExampleFence_Do() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
	fence, err := redisfence.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	const resource = "account:43"
	owner := "owner:" + redisfence.Tag(resource)
	write := func(who string) func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
		return func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			fmt.Println(who, "writes")
			pipe.Set(ctx, owner, who, 0)
			return nil
		}
	}

	a, err := replicaA.Lock(ctx, resource, mutex.WithTTL(100*time.Millisecond), mutex.WithAutoRenew(false))
	if err != nil {
		log.Fatal(err)
	}
	<-a.Context().Done() // A stalls until its lease has run out

	b, err := replicaB.Lock(ctx, resource)
	if err != nil {
		log.Fatal(err)
	}
	if err := fence.Do(ctx, resource, b.Token(), nil, write("B")); err != nil {
		log.Fatal(err)
	}
	_ = b.Release(ctx)

	// A wakes up and writes as if it still held the lock.
	err = fence.Do(ctx, resource, a.Token(), nil, write("A"))
	var stale *redisfence.StaleTokenError
	fmt.Println("A refused:", errors.As(err, &stale) && stale.Highest == b.Token())
	fmt.Println("stale token:", errors.Is(err, redisfence.ErrStaleToken))
	fmt.Println("owner:", rdb.Get(ctx, owner).Val())
	// Output:
	// B writes
	// A refused: true
	// stale token: true
	// owner: B
}

// A transfer between two balances, each under its own lock and token, in
// one MULTI/EXEC fenced on both. On one server (here) any resources go
// together; on a Cluster their fence keys must share a slot.
func ExampleFence_DoAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
	fence, err := redisfence.New(rdb)
	if err != nil {
		log.Fatal(err)
	}

	from, to := "account:44", "account:45"
	fromKey, toKey := "balance:"+redisfence.Tag(from), "balance:"+redisfence.Tag(to)
	if err := rdb.MSet(ctx, fromKey, 100, toKey, 100).Err(); err != nil {
		log.Fatal(err)
	}
	a, err := locker.Lock(ctx, from)
	if err != nil {
		log.Fatal(err)
	}
	defer a.Release(ctx)
	b, err := locker.Lock(ctx, to)
	if err != nil {
		log.Fatal(err)
	}
	defer b.Release(ctx)

	claims := []redisfence.Claim{{Resource: from, Token: a.Token()}, {Resource: to, Token: b.Token()}}
	err = fence.DoAll(ctx, claims, []string{fromKey, toKey},
		func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			n, err := tx.Get(ctx, fromKey).Int64()
			if err != nil {
				return err
			}
			if n < 10 {
				return errors.New("insufficient funds")
			}
			pipe.DecrBy(ctx, fromKey, 10)
			pipe.IncrBy(ctx, toKey, 10)
			return nil
		})
	fmt.Println("err:", err)
	fmt.Println("balances:", rdb.MGet(ctx, fromKey, toKey).Val())
	// Output:
	// err: <nil>
	// balances: [90 110]
}
