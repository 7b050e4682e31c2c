package redisdriver_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redisdriver"
)

// A Driver is what a Locker talks to; this drives one by hand, as the
// Locker does: one attempt, then the release of what it granted.
func Example() {
	client := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR")})
	defer client.Close()
	d, err := redisdriver.New(client, redisdriver.WithPrefix("app:"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close() // the client stays open: it is the caller's

	ctx := context.Background()
	g, err := d.Acquire(ctx, backend.Attempt{Key: "report", Owner: "worker-1", TTL: 10 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(g.Status == backend.Acquired, g.Token > 0)
	left, err := d.Release(ctx, backend.Lease{Key: "report", Owner: "worker-1", Token: g.Token, Handle: g.Handle})
	fmt.Println(left, err)
	// Output:
	// true true
	// 0 <nil>
}
