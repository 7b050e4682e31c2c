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

// Many readers of a price list, or one writer, across every process. The
// writer's token fences its writes; a reader's token is the last write's,
// what it reads after. A reader cannot become the writer (ErrUpgrade, at
// once); the writer can become a reader.
func Example_newRWMutex() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := lockerFor(rdb)
	defer locker.Close()

	prices, err := mutex.NewRWMutex(locker, "prices")
	if err != nil {
		log.Fatal(err)
	}
	w, err := prices.Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	// ... write the prices through a fence with w.Token() ...
	if err := w.Downgrade(ctx); err != nil { // keep reading what was written
		log.Fatal(err)
	}
	r, err := prices.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two readers; the second reads after the write:", r.Token() == w.Token())
	_, err = prices.Lock(r.Context())
	fmt.Println("upgrade:", errors.Is(err, mutex.ErrUpgrade))
	_, err = prices.TryLock(ctx)
	fmt.Println("writer while reading:", errors.Is(err, mutex.ErrNotAcquired))
	for _, h := range []*mutex.RWHold{w, r} {
		if err := h.Release(ctx); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// two readers; the second reads after the write: true
	// upgrade: true
	// writer while reading: true
}
