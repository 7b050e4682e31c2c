package admintest

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/redis/redisdriver"
)

// An operator's tool looks at a lock another process holds, and frees it
// behind the holder's back: the next holder's token exceeds the floor the
// forced release left, and the holder's renewal fails.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	service, tool := exampleLocker(rdb, "billing-worker"), exampleLocker(rdb, "ops")
	defer service.Close()
	defer tool.Close()

	lk, err := service.Lock(ctx, "invoice:9", mutex.WithTTL(time.Minute))
	if err != nil {
		log.Fatal(err)
	}

	ops, err := admin.New(tool)
	if err != nil {
		log.Fatal(err)
	}
	in, err := ops.Inspect(ctx, "invoice:9")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(in.Key, in.State, "by", in.Info.Service, "token ok:", in.Token == lk.Token())

	res, err := ops.ForceRelease(ctx, "invoice:9", admin.ForceOptions{Token: in.Token, Reason: "stuck job"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("freed:", res.Released, "floor above the token:", res.Floor > res.Token)
	fmt.Println("the holder's release:", errors.Is(lk.Release(ctx), mutex.ErrNotHeld))
	// Output:
	// invoice:9 held by billing-worker token ok: true
	// freed: 1 floor above the token: true
	// the holder's release: true
}

// exampleLocker builds a Locker over rdb as a process named service would.
func exampleLocker(rdb redis.UniversalClient, service string) *mutex.Locker {
	d, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	l, err := mutex.New(d, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: service}))
	if err != nil {
		log.Fatal(err)
	}
	return l
}
