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

// At most 2 exports of a tenant at once, across every process: a third
// TryAcquire finds both permits held, and a release gives one back. Each
// permit has its own fencing token and a context that ends if it is lost.
func Example_newSemaphore() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := lockerFor(rdb)
	defer locker.Close()

	exports, err := mutex.NewSemaphore(locker, "exports:tenant-42", 2)
	if err != nil {
		log.Fatal(err)
	}
	a, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	b, err := exports.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("tokens increase:", b.Token() > a.Token())
	_, err = exports.TryAcquire(ctx)
	fmt.Println("third busy:", errors.Is(err, mutex.ErrNotAcquired))
	if err := a.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("second release:", a.Release(ctx))
	c, err := exports.TryAcquire(ctx)
	fmt.Println("third after a release:", err == nil)
	for _, p := range []*mutex.Permit{b, c} {
		if err := p.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// tokens increase: true
	// third busy: true
	// second release: mutex: not held
	// third after a release: true
}
