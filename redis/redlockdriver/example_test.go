package redlockdriver_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redlockdriver"
)

// A Driver over three masters, used directly as the Locker uses it: one
// attempt, contention told node by node, one release.
func ExampleNew() {
	var clients []redis.UniversalClient
	for _, addr := range strings.Split(os.Getenv("REDLOCK_ADDRS"), ",") {
		c := redis.NewClient(&redis.Options{Addr: addr})
		defer c.Close()
		clients = append(clients, c)
	}
	d, err := redlockdriver.New(clients, redlockdriver.WithPrefix("example:"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer d.Close() // before the clients: it waits for the calls still out

	ctx := context.Background()
	a := backend.Attempt{Key: "report", Owner: "worker-1", TTL: 10 * time.Second}
	g, err := d.Acquire(ctx, a)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("acquired:", g.Status == backend.Acquired, "quorum:", d.Quorum())

	other, _ := d.Acquire(ctx, backend.Attempt{Key: "report", Owner: "worker-2", TTL: 10 * time.Second})
	fmt.Println("held:", other.Status == backend.Held, errors.Is(other.Detail, backend.ErrNotAcquired))

	left, err := d.Release(ctx, backend.Lease{Key: a.Key, Owner: a.Owner, Token: g.Token, Handle: g.Handle})
	fmt.Println("left:", left, err)
	// Output:
	// acquired: true quorum: 2
	// held: true true
	// left: 0 <nil>
}
