package mutex_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
)

func Example() {
	client := redis.NewClient(&redis.Options{Addr: exampleAddr})
	defer client.Close()
	locker := mutex.New(client)
	defer locker.Close()

	ctx := context.Background()
	err := locker.Do(ctx, "nightly-report", func(ctx context.Context, lk *mutex.Lock) error {
		// ctx ends if the lock is lost; pass lk.Token() to the resource.
		fmt.Println("holding", lk.Key(), "with a token:", lk.Token() > 0)
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// holding nightly-report with a token: true
	// err: <nil>
}
