package redlockdriver_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// A Driver over three masters, used directly as the Locker uses it: one
// attempt, contention told node by node, one release.
func ExampleNew() {
	var clients []redis.UniversalClient
	for _, addr := range strings.Split(os.Getenv("REDLOCK_ADDRS"), ",") {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}
	d, err := redlockdriver.New(clients, redlockdriver.WithPrefix("example:"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close() // before the clients: it waits for the calls still out

	ctx := context.Background()
	a := backend.Attempt{Key: "report", Owner: "worker-1", TTL: 10 * time.Second}
	g, err := d.Acquire(ctx, a)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("acquired:", g.Status == backend.Acquired, "quorum:", d.Quorum())

	other, _ := d.Acquire(ctx, backend.Attempt{Key: "report", Owner: "worker-2", TTL: 10 * time.Second})
	fmt.Println("held:", other.Status == backend.Held, errors.Is(other.Detail, backend.ErrNotAcquired))

	left, err := d.Release(ctx, backend.Lease{Key: a.Key, Owner: a.Owner, Token: g.Token, Handle: g.Handle})
	fmt.Println("left:", left, err)
	// Output:
	// acquired: true quorum: 2
	// held: true true
	// left: 0 <nil>
}

// A Redlock Locker is New over redlockdriver's backend of independent Redis
// masters (not replicas of one another): a lock is held when a majority
// granted it. It has the API of a single-deployment Locker.
func Example_locker() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var masters []redis.UniversalClient
	for _, addr := range strings.Split(os.Getenv("REDLOCK_ADDRS"), ",") {
		masters = append(masters, redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}))
	}
	defer func() {
		for _, c := range masters {
			_ = c.Close()
		}
	}()

	_, err := redlockdriver.New(masters[:2])
	fmt.Println("two masters:", errors.Is(err, mutex.ErrInvalid))

	d, err := redlockdriver.New(masters)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := mutex.New(d)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	err = locker.Do(ctx, "ledger:42", func(ctx context.Context, lk *mutex.Lock) error {
		fmt.Println("held on a majority of", len(masters), "masters, token:", lk.Token() > 0)
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// two masters: true
	// held on a majority of 3 masters, token: true
	// err: <nil>
}
