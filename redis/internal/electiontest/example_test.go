package electiontest

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redisfence"
)

// Two replicas run the same job; one leads. The leader stalls (its code
// ignores that its term ended), replica B takes over once A's lease ran
// out, and A's late write is refused by the fence its term feeds.
func Example() {
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
	timing := []election.Option{
		election.WithTTL(300 * time.Millisecond),
		election.WithRenewDeadline(200 * time.Millisecond),
		election.WithRetryPeriod(50 * time.Millisecond),
	}
	electionA, err := election.New(replicaA, "example-report", timing...)
	if err != nil {
		log.Fatal(err)
	}
	electionB, _ := election.New(replicaB, "example-report", timing...)

	const resource = "report:example"
	write := func(who string, term int64) error {
		return fence.Do(ctx, resource, term, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			pipe.Set(ctx, "report:author:"+redisfence.Tag(resource), who, 0)
			return nil
		})
	}

	leading, wake, stalled := make(chan int64), make(chan struct{}), make(chan error)
	runA, stopA := context.WithCancel(ctx)
	go func() {
		_ = electionA.Run(runA, "replica-a", func(_ context.Context, t *election.Term) error {
			leading <- t.Token()
			<-wake // A stalls, ignoring its term's context
			stalled <- write("A", t.Token())
			return nil
		})
		close(stalled)
	}()
	termA := <-leading
	fmt.Println("A leads:", termA > 0)
	stopA() // A's term ends; A's code does not notice

	termB, err := electionB.Campaign(ctx, "replica-b")
	if err != nil {
		log.Fatal(err)
	}
	leader, _ := electionB.Leader(ctx)
	fmt.Println("B leads:", leader.Value, termB.Token() > termA)
	fmt.Println("B writes:", write("B", termB.Token()))

	close(wake) // A wakes up and writes as if it still led
	fmt.Println("A refused:", errors.Is(<-stalled, redisfence.ErrStaleToken))
	<-stalled
	_ = termB.Release(ctx)
	// Output:
	// A leads: true
	// B leads: replica-b true
	// B writes: <nil>
	// A refused: true
}
