package mutextest

import (
	"context"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

var evalRe = regexp.MustCompile(`cmdstat_(?:evalsha|eval):calls=(\d+)`)

// evalCalls sums EVAL and EVALSHA calls in INFO commandstats output.
func evalCalls(info string) int {
	n := 0
	for _, m := range evalRe.FindAllStringSubmatch(info, -1) {
		v, _ := strconv.Atoi(m[1])
		n += v
	}
	return n
}

// checkExclusion runs goroutines on each Locker, each taking key sections
// times, and asserts that no two were ever inside at once and that every
// token was larger than the one before.
func checkExclusion(t *testing.T, lockers []*mutex.Locker, key string, goroutines, sections int) {
	t.Helper()
	var inside atomic.Int32
	var last int64 // guarded by the lock itself
	var violations, backwards atomic.Int32
	var wg sync.WaitGroup
	for _, l := range lockers {
		for range goroutines {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				for range sections {
					lk, err := l.Lock(ctx, key)
					if !assert.NoError(t, err) {
						return
					}
					if inside.Add(1) != 1 {
						violations.Add(1)
					}
					if lk.Token() <= last {
						backwards.Add(1)
					}
					last = lk.Token()
					inside.Add(-1)
					assert.NoError(t, lk.Release(ctx))
				}
			})
		}
	}
	wg.Wait()
	assert.Zero(t, violations.Load(), "two holders inside at once")
	assert.Zero(t, backwards.Load(), "a token did not increase")
}

// mustLocker is a Locker over one deployment (redistest.NewLocker) that the
// test closes itself, and what Close does is the test's to check.
func mustLocker(t testing.TB, c redis.UniversalClient, opts ...any) *mutex.Locker {
	t.Helper()
	l, err := redistest.NewLocker(c, opts...)
	require.NoError(t, err)
	return l
}

// adminOf is the operator's view of l (package mutex/admin), for the tests
// that look at what a Locker holds or end a holder behind its back.
func adminOf(t testing.TB, l *mutex.Locker) *admin.Admin {
	t.Helper()
	a, err := admin.New(l)
	require.NoError(t, err)
	return a
}

// waitFor polls cond until it holds or ctx ends: for state that another
// process (here, another Locker) changes on the server, where there is
// nothing local to wait on.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}
