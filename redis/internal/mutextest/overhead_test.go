package mutextest

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// BenchmarkLockerOverhead is the Locker's own client work for an
// uncontended Lock+Unlock, with no server: the in-memory backend of
// backend_contract_test.go behind New (a map and a mutex of its own). What
// a cycle costs in Go and in allocations beyond the Redis calls; the wall
// time of the whole cycle against its peers is bench/'s BenchmarkPaired.
// parallel runs GOMAXPROCS goroutines on keys of their own, through one
// Locker: what they share shows as contention.
func BenchmarkLockerOverhead(b *testing.B) {
	ctx := context.Background()
	cycle := func(b *testing.B, l *mutex.Locker, key string) {
		lk, err := l.Lock(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if err := lk.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("seq", func(b *testing.B) {
		l := testutil.WithBackend(b, newMemory())
		b.ReportAllocs()
		for b.Loop() {
			cycle(b, l, "k")
		}
	})
	b.Run("parallel", func(b *testing.B) {
		l := testutil.WithBackend(b, newMemory())
		var n atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			key := "k" + strconv.FormatInt(n.Add(1), 10)
			for pb.Next() {
				cycle(b, l, key)
			}
		})
	})
}
