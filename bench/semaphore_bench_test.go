package bench

import (
	"context"
	"testing"

	"github.com/redfence/redfence/mutex"
)

// BenchmarkSemaphore: 32 goroutines over 2 Lockers
// (each with its own client, as 2 processes would) take a permit of a
// semaphore of 4 and give it back at once, beside the mutex (a semaphore
// of 1, in effect) under the same load. It reports what Contended does:
// the wait distribution, round trips and Redis commands per acquisition,
// acquisitions per second.
func BenchmarkSemaphore(b *testing.B) {
	for _, name := range []string{"semaphore-4", "mutex"} {
		b.Run("g=32/lockers=2/"+name, func(b *testing.B) {
			s := startServers(b)
			admin := s.one.Client()
			b.Cleanup(func() { _ = admin.Close() })
			var subs []subject
			for range 2 {
				l := newLocker(b, s.client(b, s.one))
				if name == "mutex" {
					subs = append(subs, redfenceSubject(b, name, l))
					continue
				}
				subs = append(subs, semaphoreSubject(b, l, 4))
			}
			ctx := context.Background()
			contend(ctx, b, 32, subs, func() int64 { return commandCalls(ctx, admin) }, s.rtt)
		})
	}
}

// semaphoreSubject takes a permit of the semaphore "hot" (contend's key)
// of n permits, as a subject's lock.
func semaphoreSubject(b *testing.B, l *mutex.Locker, n int) subject {
	b.Cleanup(func() { _ = l.Close() })
	s, err := mutex.NewSemaphore(l, "hot", n)
	if err != nil {
		b.Fatal(err)
	}
	return subject{"semaphore", func(ctx context.Context, key string) (func() error, error) {
		p, err := s.Acquire(ctx)
		if err != nil {
			return nil, err
		}
		return func() error { return p.Release(ctx) }, nil
	}}
}
