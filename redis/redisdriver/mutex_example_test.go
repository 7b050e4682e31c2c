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
	"github.com/redfence/redfence/redis/redisdriver"
)

// A lock on a key of one Redis deployment: a driver builds the backend
// over the client, New the Locker over the backend (which it then owns).
// Lock waits until the key is free, Release frees it, and the lock's
// context ends on either loss or release.
func Example_locker() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close() // after the Locker's Close: the client stays the caller's
	d, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := mutex.New(d)
	if err != nil {
		log.Fatal(err)
	}
	defer locker.Close() // closes d too

	lk, err := locker.Lock(ctx, "report:2026-11")
	if err != nil {
		log.Fatal(err)
	}
	// Work under the lock uses lk.Context(), which ends if the lock is lost,
	// and sends lk.Token() with every write to the protected resource.
	fmt.Println("held:", lk.Key(), lk.Token() > 0)

	if err := lk.Release(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("released:", context.Cause(lk.Context()) == mutex.ErrReleased)
	// Output:
	// held: report:2026-11 true
	// released: true
}

// Do is Lock, fn, Release; the Release happens however fn ends.
func Example_lockerDo() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := lockerFor(rdb)
	defer locker.Close()

	err := locker.Do(ctx, "ledger:42", func(ctx context.Context, lk *mutex.Lock) error {
		// ctx ends when the caller's does, or with cause mutex.ErrLockLost
		// when the lock is lost: stop writing then.
		fmt.Println("writing with a fencing token:", lk.Token() > 0)
		return nil
	})
	fmt.Println("err:", err)
	// Output:
	// writing with a fencing token: true
	// err: <nil>
}

// TryLock does not wait: a key held by another owner (here another Locker,
// as in another process) is ErrNotAcquired at once, which is contention,
// not an outage (ErrUnavailable).
func Example_lockerTryLock() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	replicaA, replicaB := lockerFor(rdb), lockerFor(rdb) // as two processes would
	defer replicaA.Close()
	defer replicaB.Close()

	held, err := replicaA.TryLock(ctx, "cleanup:tmp")
	if err != nil {
		log.Fatal(err)
	}

	_, err = replicaB.TryLock(ctx, "cleanup:tmp")
	fmt.Println("busy:", errors.Is(err, mutex.ErrNotAcquired))
	fmt.Println("outage:", errors.Is(err, mutex.ErrUnavailable))

	if err := held.Release(ctx); err != nil {
		log.Fatal(err)
	}
	lk, err := replicaB.TryLock(ctx, "cleanup:tmp")
	fmt.Println("after the release:", err == nil)
	if err == nil {
		_ = lk.Release(ctx)
	}
	// Output:
	// busy: true
	// outage: false
	// after the release: true
}

// Lock waits for the holder's release; the next holder's token is larger,
// so a resource that checks tokens can tell the two writers apart.
func Example_lockerLock() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	replicaA, replicaB := lockerFor(rdb), lockerFor(rdb) // as two processes would
	defer replicaA.Close()
	defer replicaB.Close()

	first, err := replicaA.Lock(ctx, "invoice:7")
	if err != nil {
		log.Fatal(err)
	}
	next := make(chan *mutex.Lock)
	go func() {
		lk, err := replicaB.Lock(ctx, "invoice:7") // waits for the release
		if err != nil {
			log.Fatal(err)
		}
		next <- lk
	}()

	fmt.Println("A releases")
	if err := first.Release(ctx); err != nil {
		log.Fatal(err)
	}
	second := <-next
	fmt.Println("B holds, with a larger token:", second.Token() > first.Token())
	if err := second.Release(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// A releases
	// B holds, with a larger token: true
}

// Lock waits as long as its ctx allows; when the ctx ends first, the error
// matches both ErrNotAcquired and the ctx's error.
func Example_lockerLockDeadline() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	replicaA, replicaB := lockerFor(rdb), lockerFor(rdb) // as two processes would
	defer replicaA.Close()
	defer replicaB.Close()

	held, err := replicaA.Lock(ctx, "export:daily")
	if err != nil {
		log.Fatal(err)
	}
	defer held.Release(ctx)

	wait, cancelWait := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancelWait()
	_, err = replicaB.Lock(wait, "export:daily")
	fmt.Println("not acquired:", errors.Is(err, mutex.ErrNotAcquired))
	fmt.Println("deadline:", errors.Is(err, context.DeadlineExceeded))
	// Output:
	// not acquired: true
	// deadline: true
}

// Locking again with the lock's own context re-enters it: the same *Lock,
// one more count, no round trip. The last Release frees it.
func Example_lockerLockReentrant() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := lockerFor(rdb)
	defer locker.Close()

	outer, err := locker.Lock(ctx, "tree:1")
	if err != nil {
		log.Fatal(err)
	}
	inner, err := locker.Lock(outer.Context(), "tree:1")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("same lock:", inner == outer)

	_ = inner.Release(ctx)
	fmt.Println("held after the inner Release:", outer.Context().Err() == nil)
	_ = outer.Release(ctx)
	fmt.Println("held after the outer Release:", outer.Context().Err() == nil)
	// Output:
	// same lock: true
	// held after the inner Release: true
	// held after the outer Release: false
}

// A lock can be lost: here an operator flushes Redis (a restart without its
// data does the same). The next renewal finds the lock gone and ends its
// context with cause ErrLockLost; the lock is never taken again behind the
// holder's back.
func Example_lockContext() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := lockerFor(rdb)
	defer locker.Close()

	// A short lease, renewed every third of it, so that the loss shows soon.
	lk, err := locker.Lock(ctx, "import:feed", mutex.WithTTL(300*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}

	// An operator flushes Redis: the lock's key is gone.
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		log.Fatal(err)
	}

	// Work under the lock watches its context, and stops when it ends.
	<-lk.Context().Done()
	fmt.Println("lock lost:", errors.Is(context.Cause(lk.Context()), mutex.ErrLockLost))
	fmt.Println("release:", errors.Is(lk.Release(ctx), mutex.ErrNotHeld))
	// Output:
	// lock lost: true
	// release: true
}

// Join serves a caller under a lock held for longer than its call: the joined
// context ends with the caller's ctx or with the lock, whichever ends first.
func Example_lockJoin() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: os.Getenv("REDIS_ADDR"), ContextTimeoutEnabled: true})
	defer rdb.Close()
	locker := lockerFor(rdb)
	defer locker.Close()

	lk, err := locker.Lock(ctx, "shard:3")
	if err != nil {
		log.Fatal(err)
	}

	request, cancelRequest := context.WithCancel(ctx)
	work, done := lk.Join(request)
	defer done()
	cancelRequest() // the caller went away; the lock is still held
	<-work.Done()
	fmt.Println("caller gone:", errors.Is(context.Cause(work), context.Canceled))
	fmt.Println("lock held:", lk.Context().Err() == nil)

	work2, done2 := lk.Join(ctx)
	defer done2()
	_ = lk.Release(ctx) // the lock ends first this time
	<-work2.Done()
	fmt.Println("lock released:", errors.Is(context.Cause(work2), mutex.ErrReleased))
	// Output:
	// caller gone: true
	// lock held: true
	// lock released: true
}

// lockerFor builds a Locker over rdb as the examples' programs do: a
// redisdriver backend over the client, and New over the backend.
func lockerFor(rdb redis.UniversalClient) *mutex.Locker {
	d, err := redisdriver.New(rdb)
	if err != nil {
		log.Fatal(err)
	}
	locker, err := mutex.New(d)
	if err != nil {
		log.Fatal(err)
	}
	return locker
}
