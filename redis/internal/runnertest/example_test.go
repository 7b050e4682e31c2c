package runnertest

import (
	"context"
	"fmt"
	"log"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/runner"
)

// A job runs at each slot of its interval until Run's ctx ends; Last reads
// the record of its latest run.
func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	d, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := mutex.New(d)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close()

	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()
	r, err := runner.New(locker, runner.WithReplicaID("replica-1"))
	if err != nil {
		log.Fatal(err)
	}
	err = r.Add("rollup", time.Second, func(ctx context.Context, run runner.Run) error {
		// ctx ends with cause mutex.ErrLockLost if the job's lock is lost;
		// run.Token goes with the job's writes (package fenced).
		fmt.Println("rollup on", run.Replica, "with a token:", run.Token > 0)
		shutdown() // one run is enough here; a service runs until it stops
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("Run:", r.Run(ctx)) // until ctx ends, then waits for runs in progress

	last, err := r.Last(context.Background(), "rollup")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("last run:", last.Outcome, "on", last.Replica)
	// Output:
	// rollup on replica-1 with a token: true
	// Run: <nil>
	// last run: ok on replica-1
}

// Two replicas run the same job: each slot runs on one of them only,
// whatever their clocks say, since slots come from the Redis server's clock.
func Example_runnerRun() {
	ctx, shutdown := context.WithCancel(context.Background())
	defer shutdown()

	var mu sync.Mutex
	runs, slots := 0, map[time.Time]bool{}
	job := func(ctx context.Context, run runner.Run) error {
		mu.Lock()
		defer mu.Unlock()
		runs++
		slots[run.Slot] = true
		if len(slots) == 3 {
			shutdown()
		}
		return nil
	}

	var wg sync.WaitGroup
	for _, id := range []string{"replica-1", "replica-2"} {
		// Each replica is a process of its own, with its own client.
		rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
		d, err := redisdriver.New(rdb)
		if err != nil {
			log.Fatal(err)
		}
		locker, err := mutex.New(d)
		if err != nil {
			log.Fatal(err)
		}
		r, err := runner.New(locker, runner.WithReplicaID(id))
		if err != nil {
			log.Fatal(err)
		}
		if err := r.Add("compact", 100*time.Millisecond, job); err != nil {
			log.Fatal(err)
		}
		wg.Go(func() {
			if err := r.Run(ctx); err != nil {
				log.Fatal(err)
			}
			_ = locker.Close()
			_ = rdb.Close()
		})
	}
	wg.Wait()

	fmt.Println("slots run:", len(slots) >= 3)
	fmt.Println("each slot once:", len(slots) == runs)
	// Output:
	// slots run: true
	// each slot once: true
}
