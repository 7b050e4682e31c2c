package mutextest

import (
	"context"
	"testing"

	"github.com/redfence/redfence/internal/redistest"
)

// BenchmarkLockAll is an uncontended transfer's locking on one standalone
// server: LockAll of two keys (one script) and Unlock, against two Locks in
// order and their Unlocks (two scripts each way).
func BenchmarkLockAll(b *testing.B) {
	c, _ := redistest.Redis(b)
	l := redistest.Locker(b, c)
	ctx := context.Background()
	keys := []string{"from", "to"}
	b.Run("LockAll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ls, err := l.LockAll(ctx, keys)
			if err != nil {
				b.Fatal(err)
			}
			if err := ls.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("two Locks", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			a, err := l.Lock(ctx, keys[0])
			if err != nil {
				b.Fatal(err)
			}
			z, err := l.Lock(ctx, keys[1])
			if err != nil {
				b.Fatal(err)
			}
			if err := z.Release(ctx); err != nil {
				b.Fatal(err)
			}
			if err := a.Release(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}
