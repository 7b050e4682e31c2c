// Command quickstart takes a lock on Redis, writes under it, and lets it
// go: the README's example. REDIS_URL names the server (default
// redis://localhost:6379).
package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
)

func main() {
	url := os.Getenv("REDIS_URL")
	if url == "" {
		url = "redis://localhost:6379"
	}
	if err := run(context.Background(), url); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, url string) error {
	rdb, err := newClient(url)
	if err != nil {
		return err
	}
	defer rdb.Close()

	d, err := redisdriver.New(rdb)
	if err != nil {
		return err
	}
	locker, err := mutex.New(d) // the Locker owns d: Close closes it
	if err != nil {
		return err
	}
	defer locker.Close()

	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	lk, err := locker.Lock(ctx, "invoice:42") // waits its turn, renews itself
	if err != nil {
		return err
	}
	defer lk.Release(context.WithoutCancel(ctx))

	// Work on lk.Context(): it ends if the lock is lost. Hand the token to
	// the resource (package fenced) so that it refuses a stale holder.
	fmt.Println("holding invoice:42 with token", lk.Token())
	return lk.Context().Err()
}

// newClient returns a client for locks. Its calls end at their ctx's
// deadline, and while Redis refuses connections each fails at once, not
// after go-redis's dial and command retries: redfence retries where that
// is safe, and a script go-redis resends after a lost reply may run twice.
func newClient(url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return nil, err
	}
	opt.ContextTimeoutEnabled = true
	opt.DialTimeout = time.Second // a connection not made by then is down
	opt.DialerRetries = 1         // a refused dial is an answer
	opt.MaxRetries = -1           // no resends
	return redis.NewClient(opt), nil
}
