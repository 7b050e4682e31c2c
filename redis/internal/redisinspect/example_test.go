package redisinspect_test

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisinspect"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// A driver embeds an Inspector over its clients, and runs its calls on
// goroutines its Close waits for.
func Example() {
	c := redis.NewClient(&redis.Options{Addr: os.Getenv(redistest.EnvRedisAddr)})
	defer c.Close()
	var wg sync.WaitGroup
	defer wg.Wait() // (before Close: the deferred calls run last first)
	in := redisinspect.New(redisinspect.Config{
		Prefix:  "example:",
		Servers: []redis.UniversalClient{c},
		Go:      func(fn func()) { wg.Go(fn) },
	})
	ctx := context.Background()
	name := redisproto.LockKey("example:", "report")
	_ = redisproto.AcquireScript.Run(ctx, c, []string{name}, "owner-1", 60000).Err()

	st, err := in.Inspect(ctx, "report")
	fmt.Println(st.Name, st.Owner, st.Count, err)
	f, err := in.ForceRelease(ctx, "report", backend.Force{By: "ops", Reason: "stuck"})
	fmt.Println(f.Released, f.Owner, f.Floor == f.Token+1, err)
	st, _ = in.Inspect(ctx, "report")
	fmt.Printf("%q %s\n", st.Owner, st.Forced[0].Reason)
	// Output:
	// example:{report} owner-1 1 <nil>
	// true owner-1 true <nil>
	// "" stuck
}
