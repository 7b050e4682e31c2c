package bench

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/redisfence"
)

// BenchmarkRedisFencePaired: a read-modify-write of a counter through
// redisfence.Fence.Do (the fence key WATCHed and read with the counter,
// its SET in the same MULTI) against the same WATCH/GET/MULTI/SET/EXEC
// without the fence, in alternating blocks of 20 operations inside one
// benchmark, which side goes first alternating too: what the fence adds
// to a write that is already a Redis transaction. In parallel mode each of
// GOMAXPROCS goroutines has its own resource, so nothing contends.
func BenchmarkRedisFencePaired(b *testing.B) {
	_, srv := redistest.Redis(b)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	b.Cleanup(func() { _ = c.Close() })
	f, err := redisfence.New(c)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()

	plain := func(res string) error {
		counter := "bench:plain:" + redisfence.Tag(res)
		return c.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Get(ctx, counter).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
				pipe.Set(ctx, counter, n+1, 0)
				return nil
			})
			return err
		}, counter)
	}
	fenced := func(res string) error {
		counter := "bench:fenced:" + redisfence.Tag(res)
		return f.Do(ctx, res, 1, []string{counter}, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			n, err := tx.Get(ctx, counter).Int64()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			pipe.Set(ctx, counter, n+1, 0)
			return nil
		})
	}

	for _, par := range []int{1, max(2, runtime.GOMAXPROCS(0))} {
		mode := "seq"
		if par > 1 {
			mode = "parallel"
		}
		b.Run(mode+"/fenced-vs-plain", func(b *testing.B) { alternateBlocks(b, par, "rmw-"+mode+"-", plain, fenced) })
	}
}
