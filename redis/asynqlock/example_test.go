package asynqlock_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
	"github.com/redfence/redfence/redis/redisdriver"
)

// An asynq server whose handlers run one at a time per account, across every
// server sharing the Redis.
func Example() {
	redisOpt := asynq.RedisClientOpt{Addr: os.Getenv("REDIS_ADDR")}
	rdb := redis.NewClient(&redis.Options{Addr: redisOpt.Addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	d, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := mutex.New(d)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // closes d; rdb stays the caller's

	mw, err := asynqlock.New(locker, asynqlock.WithKey(func(t *asynq.Task) (string, error) {
		var p struct {
			Account string `json:"account"`
		}
		err := json.Unmarshal(t.Payload(), &p)
		return "account:" + p.Account, err
	}))
	if err != nil {
		log.Fatal(err)
	}

	done := make(chan struct{})
	mux := asynq.NewServeMux()
	mux.Use(mw)
	mux.HandleFunc("transfer", func(ctx context.Context, t *asynq.Task) error {
		// ctx ends with cause mutex.ErrLockLost if the lock is lost; the
		// token goes with the writes (package fenced).
		_, ok := asynqlock.Token(ctx)
		fmt.Println("transfer under the account's lock:", ok)
		close(done)
		return nil
	})
	// Config makes a busy key a quick retry rather than a failure.
	srv := asynq.NewServer(redisOpt, asynqlock.Config(asynq.Config{Concurrency: 10, LogLevel: asynq.WarnLevel}))
	if err := srv.Start(mux); err != nil {
		log.Fatal(err)
	}
	defer srv.Shutdown()

	client := asynq.NewClient(redisOpt)
	defer client.Close()
	if _, err := client.Enqueue(asynq.NewTask("transfer", []byte(`{"account":"42"}`))); err != nil {
		log.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		fmt.Println("no worker ran the task")
	}
	// Output:
	// transfer under the account's lock: true
}

// The middleware wraps any asynq.Handler; here one is called directly, as a
// worker would. The handler runs under the task's lock and finds its fencing
// token in ctx.
func ExampleNew() {
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
	defer locker.Close() // closes d; rdb stays the caller's

	mw, err := asynqlock.New(locker) // default key: the task type and a hash of the payload
	if err != nil {
		log.Fatal(err)
	}
	handler := mw(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		token, ok := asynqlock.Token(ctx)
		fmt.Println("token:", ok && token > 0)
		return nil
	}))

	err = handler.ProcessTask(context.Background(), asynq.NewTask("email:welcome", []byte(`{"user":7}`)))
	fmt.Println("err:", err)
	// Output:
	// token: true
	// err: <nil>
}

// A task whose key is busy returns ErrLocked at once; with Config (or
// IsFailure in your asynq.Config) asynq retries it without counting a
// failure.
func ExampleIsFailure() {
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
	defer locker.Close() // closes d; rdb stays the caller's

	mw, err := asynqlock.New(locker)
	if err != nil {
		log.Fatal(err)
	}
	started, finish := make(chan struct{}), make(chan struct{})
	handler := mw(asynq.HandlerFunc(func(ctx context.Context, t *asynq.Task) error {
		close(started)
		<-finish // a long job
		return nil
	}))
	task := asynq.NewTask("report:build", []byte(`{"month":"2026-11"}`))

	first := make(chan error)
	go func() { first <- handler.ProcessTask(context.Background(), task) }()
	<-started

	err = handler.ProcessTask(context.Background(), task) // the same task, on another worker
	fmt.Println("locked:", errors.Is(err, asynqlock.ErrLocked))
	fmt.Println("a failure:", asynqlock.IsFailure(err))

	close(finish)
	fmt.Println("first:", <-first)
	// Output:
	// locked: true
	// a failure: false
	// first: <nil>
}
