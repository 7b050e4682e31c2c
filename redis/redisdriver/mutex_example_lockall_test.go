package redisdriver_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
)

// A transfer locks both accounts with DoAll: keys in any order, taken in
// one order every Locker shares, so two transfers in opposite directions
// wait for each other instead of deadlocking. Each account has its own
// fencing token for the write.
func Example_lockerDoAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := lockerFor(rdb)
	defer locker.Close()

	from, to := "account:17", "account:4"
	err := locker.DoAll(ctx, []string{from, to}, func(ctx context.Context, ls *mutex.Locks) error {
		// ctx ends when the caller's does, or when either account's lock
		// is lost (context.Cause names it): stop writing then.
		fmt.Println("keys:", ls.Keys())
		fmt.Println("a token per account:", ls.TokenOf(from) > 0, ls.TokenOf(to) > 0)
		// A resource guarded by the pair as a whole takes the set's token,
		// the larger of the two.
		fmt.Println("the set's token:", ls.Token() == max(ls.TokenOf(from), ls.TokenOf(to)))
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// keys: [account:17 account:4]
	// a token per account: true true
	// the set's token: true
	// err: <nil>
}

// TryLockAll takes every key or none: one key held elsewhere, and the
// others are left free.
func Example_lockerTryLockAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := lockerFor(rdb)
	defer locker.Close()

	lk, err := locker.Lock(ctx, "seat:12B")
	if err != nil {
		log.Fatal(err)
	}
	_, err = locker.TryLockAll(ctx, []string{"seat:12A", "seat:12B"})
	fmt.Println("busy:", errors.Is(err, mutex.ErrNotAcquired))
	if err := lk.Release(ctx); err != nil {
		log.Fatal(err)
	}
	ls, err := locker.TryLockAll(ctx, []string{"seat:12A", "seat:12B"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("held:", ls.Keys())
	if err := ls.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// busy: true
	// held: [seat:12A seat:12B]
}
