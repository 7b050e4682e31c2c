package mutex_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/pgdriver"
)

// A lock on a key, here over PostgreSQL (pgdriver, in this module): a
// driver builds the backend, New the Locker over it (which then owns it).
// Lock waits until the key is free, Release frees it, and the lock's
// context ends on either loss or release. Over Redis the first lines are
// redisdriver.New(rdb), in the redis module, and the rest is the same;
// redisdriver's examples show more of the Locker.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close() // after the Locker's Close: the pool stays the caller's
	d, err := pgdriver.New(pool)
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Migrate(ctx); err != nil { // once per database, at deploy
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
