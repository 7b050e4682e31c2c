package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/redis/redisfence"
)

func TestStaleRejectedEqualAccepted(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		f := newFence(t, tg.watcher)
		res, other := p+"acct-1", p+"acct-2"

		require.NoError(t, f.Do(ctx, res, 5, nil, logWrite(res, "first")))

		called := false
		err := f.Do(ctx, res, 3, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			called = true
			return logWrite(res, "stale")(ctx, tx, pipe)
		})
		require.ErrorIs(t, err, redisfence.ErrStaleToken)
		var stale *redisfence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		assert.Equal(t, redisfence.StaleTokenError{Resource: res, Token: 3, Highest: 5}, *stale)
		assert.False(t, called, "fn must not run for a stale token")

		// The same holder writing again with its token is fine.
		require.NoError(t, f.Do(ctx, res, 5, nil, logWrite(res, "again")))
		// Another resource has its own fence.
		require.NoError(t, f.Do(ctx, other, 1, nil, logWrite(other, "other")))

		assert.Equal(t, []string{"first", "again"}, logOf(t, tg.client, res))
		assert.Equal(t, []string{"other"}, logOf(t, tg.client, other))
		assert.Equal(t, "5", fenceValue(t, tg.client, res))
		assert.Equal(t, "1", fenceValue(t, tg.client, other))
	})
}

func TestFnErrorAndPanicLeaveNothing(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		f := newFence(t, tg.watcher)
		res := p + "r"
		boom := errors.New("boom")

		err := f.Do(ctx, res, 7, []string{key("log", res)}, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			_ = logWrite(res, "failed")(ctx, tx, pipe)
			return boom
		})
		require.Equal(t, boom, err, "fn's error comes back as it is")

		assert.PanicsWithValue(t, "kaboom", func() {
			_ = f.Do(ctx, res, 8, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
				_ = logWrite(res, "panicked")(ctx, tx, pipe)
				panic("kaboom")
			})
		})

		assert.Empty(t, logOf(t, tg.client, res), "nothing of a failed fn is written")
		assert.Empty(t, fenceValue(t, tg.client, res), "the token of a failed Do is not recorded")
		// So a lower token than the failed ones is still accepted.
		require.NoError(t, f.Do(ctx, res, 6, nil, logWrite(res, "ok")))
		assert.Equal(t, []string{"ok"}, logOf(t, tg.client, res))
	})
}

// TestNoWatchLeftBehind: however Do ends without EXEC, the connection goes
// back to the pool without a WATCH. On a client of one connection, a WATCH
// left behind would make the next plain MULTI/EXEC fail once a key it
// covers changed.
func TestNoWatchLeftBehind(t *testing.T) {
	endings := []struct {
		name string
		do   func(ctx context.Context, f *redisfence.Fence, res string, keys []string) error
		want error
	}{
		{"stale", func(ctx context.Context, f *redisfence.Fence, res string, keys []string) error {
			if err := f.Do(ctx, res, 9, nil, logWrite(res, "high")); err != nil {
				return err
			}
			return f.Do(ctx, res, 1, keys, logWrite(res, "stale"))
		}, redisfence.ErrStaleToken},
		{"fn error", func(ctx context.Context, f *redisfence.Fence, res string, keys []string) error {
			return f.Do(ctx, res, 1, keys, func(context.Context, *redis.Tx, redis.Pipeliner) error { return errBoom })
		}, errBoom},
		{"panic", func(ctx context.Context, f *redisfence.Fence, res string, keys []string) (err error) {
			defer func() {
				if recover() != nil {
					err = errPanicked
				}
			}()
			return f.Do(ctx, res, 1, keys, func(context.Context, *redis.Tx, redis.Pipeliner) error { panic("kaboom") })
		}, errPanicked},
		{"ctx cancelled in fn", func(ctx context.Context, f *redisfence.Fence, res string, keys []string) error {
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			return f.Do(ctx, res, 1, keys, func(context.Context, *redis.Tx, redis.Pipeliner) error {
				cancel()
				return nil
			})
		}, context.Canceled},
		{"fn executed pipe", func(ctx context.Context, f *redisfence.Fence, res string, keys []string) error {
			return f.Do(ctx, res, 1, keys, func(ctx context.Context, _ *redis.Tx, pipe redis.Pipeliner) error {
				pipe.RPush(ctx, key("log", res), "x")
				_, _ = pipe.Exec(ctx) // its error ignored: Do still refuses
				return nil
			})
		}, redisfence.ErrInvalid},
	}
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		for _, e := range endings {
			t.Run(e.name, func(t *testing.T) {
				narrow, w := tg.narrow(t)
				f := newFence(t, w)
				res := p + e.name
				data := key("data", res)
				err := e.do(ctx, f, res, []string{data})
				require.ErrorIs(t, err, e.want)
				// Another client changes what Do WATCHed ...
				require.NoError(t, tg.client.Set(ctx, data, "changed", 0).Err())
				require.NoError(t, tg.client.Set(ctx, fenceOf(res), "100", 0).Err())
				// ... and a plain transaction on the one connection commits.
				_, err = narrow.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
					pipe.Set(ctx, key("scratch", res), "1", 0)
					return nil
				})
				require.NoError(t, err, "a WATCH was left on the connection")
				if e.name != "stale" {
					assert.Empty(t, logOf(t, tg.client, res))
				}
			})
		}
	})
}

var (
	errBoom     = errors.New("boom")
	errPanicked = errors.New("panicked")
)

// TestFirstWriteRace: 16 goroutines race on a resource with no fence. Only
// stale rejections are allowed, the highest token always wins, and the
// accepted tokens do not decrease in commit order.
func TestFirstWriteRace(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		f := newFence(t, tg.watcher)
		for round := range 5 {
			res := fmt.Sprintf("%sfresh-%d", p, round)
			ctx := context.Background()
			const n = 16
			start := make(chan struct{})
			errs := make([]error, n)
			tokens := rand.Perm(n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					<-start
					tok := int64(tokens[i]) / 2 // pairs of equal tokens
					errs[i] = f.Do(ctx, res, tok, nil, logWrite(res, strconv.FormatInt(tok, 10)))
				})
			}
			close(start)
			wg.Wait()

			var highest int64 = -1
			accepted := 0
			for i, err := range errs {
				if err != nil {
					require.ErrorIs(t, err, redisfence.ErrStaleToken, "only stale rejections are allowed")
					continue
				}
				accepted++
				highest = max(highest, int64(tokens[i])/2)
			}
			assert.Equal(t, int64((n-1)/2), highest, "the highest token is always accepted")
			assert.Equal(t, strconv.FormatInt(highest, 10), fenceValue(t, tg.client, res))
			log := logOf(t, tg.client, res)
			assert.Len(t, log, accepted, "every accepted write, and only those, left its entry")
			assert.IsNonDecreasing(t, atoi(t, log), "committed tokens")
		}
	})
}

func atoi(t *testing.T, ss []string) []int64 {
	t.Helper()
	out := make([]int64, len(ss))
	for i, s := range ss {
		n, err := strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
		out[i] = n
	}
	return out
}

// mutateEnv, set to skip-fence-watch, applies the mutation to the
// concurrency test itself, to see it fail:
//
//	REDISFENCE_MUTATE=skip-fence-watch go test -race -run TestConcurrentWriters ./redis/redisfence/
const mutateEnv = "REDISFENCE_MUTATE"

// TestConcurrentWritersCommitInTokenOrder: 32 writers over 4 resources, a
// read-modify-write or a blind write of a counter each, with the log as an
// independent witness of the commit order (see concurrentWriters).
func TestConcurrentWritersCommitInTokenOrder(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		f := newFence(t, tg.watcher)
		if os.Getenv(mutateEnv) == "skip-fence-watch" {
			if tg.name == "cluster" {
				t.Skip("the mutation leaves a blind write nothing to route by on a Cluster")
			}
			redisfence.SkipFenceWatch(f)
		}
		assert.Empty(t, concurrentWriters(t, tg, f, p))
	})
}

// TestMutationIsCaught: without the WATCH of the fence key, the
// concurrency test sees tokens committed out of order. (Try it by hand
// with REDISFENCE_MUTATE=skip-fence-watch.)
func TestMutationIsCaught(t *testing.T) {
	c, _ := redistest.Redis(t)
	tg := target{name: "mutated", client: c, watcher: c}
	var problems []string
	for run := range 3 {
		f := newFence(t, c)
		redisfence.SkipFenceWatch(f)
		problems = concurrentWriters(t, tg, f, fmt.Sprintf("mutated-%d/", run))
		if len(problems) > 0 {
			break
		}
	}
	require.NotEmpty(t, problems, "the concurrency test does not notice a fence key left unWATCHed")
	assert.Contains(t, fmt.Sprint(problems), "committed after")
	t.Logf("caught: %d problems, the first: %s", len(problems), problems[0])
}

// TestLostRaceRetried: a write whose WATCHed key changes before its EXEC is
// tried again, from the WATCH, up to WithAttempts times; then ErrContended,
// and nothing written.
func TestLostRaceRetried(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		// disturb returns an fn that changes a key it WATCHes behind its
		// back in its first n runs, and counts its runs.
		disturb := func(res string, n int, runs *int) func(context.Context, *redis.Tx, redis.Pipeliner) error {
			return func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
				*runs++
				if *runs <= n {
					if err := tg.client.Incr(ctx, key("data", res)).Err(); err != nil {
						return err
					}
				}
				return logWrite(res, strconv.Itoa(*runs))(ctx, tx, pipe)
			}
		}

		res := p + "retried"
		runs := 0
		require.NoError(t, newFence(t, tg.watcher).Do(ctx, res, 1, []string{key("data", res)}, disturb(res, 3, &runs)))
		assert.Equal(t, 4, runs)
		assert.Equal(t, []string{"4"}, logOf(t, tg.client, res), "only the last run's commands are applied")

		res = p + "given-up"
		runs = 0
		err := newFence(t, tg.watcher, redisfence.WithAttempts(2)).Do(ctx, res, 1, []string{key("data", res)}, disturb(res, 5, &runs))
		require.ErrorIs(t, err, redisfence.ErrContended)
		require.ErrorIs(t, err, redis.TxFailedErr)
		assert.Contains(t, err.Error(), "2 attempts")
		assert.Equal(t, 2, runs)
		assert.Empty(t, logOf(t, tg.client, res))
		assert.Empty(t, fenceValue(t, tg.client, res))

		// The fence key itself is WATCHed: a token recorded meanwhile
		// sends Do round again, and the next read finds it stale.
		res = p + "overtaken"
		runs = 0
		err = newFence(t, tg.watcher).Do(ctx, res, 1, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			runs++
			if err := tg.client.Set(ctx, fenceOf(res), "2", 0).Err(); err != nil {
				return err
			}
			return logWrite(res, "late")(ctx, tx, pipe)
		})
		var stale *redisfence.StaleTokenError
		require.ErrorAs(t, err, &stale)
		assert.Equal(t, int64(2), stale.Highest)
		assert.Equal(t, 1, runs)
		assert.Empty(t, logOf(t, tg.client, res))

		// A deadline that ends while Do keeps losing: the error says so.
		res = p + "deadline"
		runs = 0
		late := testutil.MeasureLateness(t)
		dctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err = newFence(t, tg.watcher, redisfence.WithAttempts(1000)).Do(dctx, res, 1, []string{key("data", res)}, disturb(res, 1<<30, &runs))
		assert.Less(t, time.Since(start), late.Bound(time.Second), "Do outlived its deadline")
		// Most often the deadline ends the pause between two attempts
		// (ErrContended, with ctx.Err()); it can end a round trip instead,
		// which is a timeout on the socket.
		var netErr net.Error
		if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &netErr) && netErr.Timeout()) {
			t.Errorf("want the deadline, got %v", err)
		}
		assert.Greater(t, runs, 1)
		assert.Empty(t, logOf(t, tg.client, res))
	})
}

// TestReadModifyWrite: what fn reads through tx, and the replies of what it
// queued, which Do fills in.
func TestReadModifyWrite(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		f := newFence(t, tg.watcher)
		res := p + "account:42"
		balance := key("balance", res)
		require.NoError(t, tg.client.Set(ctx, balance, 100, 0).Err())
		var after *redis.IntCmd
		err := f.Do(ctx, res, 1, []string{balance}, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			n, err := tx.Get(ctx, balance).Int64()
			if err != nil {
				return err
			}
			if n < 10 {
				return errors.New("insufficient funds")
			}
			after = pipe.DecrBy(ctx, balance, 10)
			return nil
		})
		require.NoError(t, err)
		assert.Equal(t, int64(90), after.Val())
		n, err := tg.client.Get(ctx, balance).Int64()
		require.NoError(t, err)
		assert.Equal(t, int64(90), n)
	})
}

// TestFailuresInsideExec: Redis does not roll back. A command that fails
// while EXEC runs leaves the others applied and the token recorded, and Do
// says so; one refused while queued aborts everything.
func TestFailuresInsideExec(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		f := newFence(t, tg.watcher)

		res := p + "wrongtype"
		require.NoError(t, tg.client.RPush(ctx, key("list", res), "x").Err())
		err := f.Do(ctx, res, 3, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			pipe.Incr(ctx, key("list", res)) // WRONGTYPE, at run time
			return logWrite(res, "applied")(ctx, tx, pipe)
		})
		var rerr redis.Error
		require.ErrorAs(t, err, &rerr)
		assert.Contains(t, err.Error(), "WRONGTYPE")
		assert.Contains(t, err.Error(), "token 3 recorded")
		assert.Equal(t, []string{"applied"}, logOf(t, tg.client, res))
		assert.Equal(t, "3", fenceValue(t, tg.client, res))

		res = p + "execabort"
		err = f.Do(ctx, res, 3, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
			pipe.Do(ctx, "no-such-command", key("x", res)) // refused while queued
			return logWrite(res, "aborted")(ctx, tx, pipe)
		})
		require.Error(t, err)
		assert.True(t, redis.IsExecAbortError(err) || errors.As(err, &rerr), "%v", err)
		assert.NotContains(t, err.Error(), "recorded")
		assert.Empty(t, logOf(t, tg.client, res))
		assert.Empty(t, fenceValue(t, tg.client, res))
	})
}

// TestFenceTTL: with WithFenceTTL an accepted write gives the fence key a
// TTL of 1.5 × the option's, which never shortens a fence's life: a key
// without expiry keeps none, a longer TTL left is kept, and a key holding
// the token is rewritten only when less than 1.25 × the option's is left.
func TestFenceTTL(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := context.Background()
	pttl := func(res string) time.Duration {
		d, err := c.PTTL(ctx, fenceOf(res)).Result()
		require.NoError(t, err)
		return d
	}
	permanent := newFence(t, c)
	f := newFence(t, c, redisfence.WithFenceTTL(time.Minute))
	const slack = 5 * time.Second // the test's own time between a write and PTTL

	require.NoError(t, permanent.Do(ctx, "forever", 1, nil, logWrite("forever", "x")))
	assert.Equal(t, time.Duration(-1), pttl("forever"), "by default a fence never expires")
	require.NoError(t, f.Do(ctx, "forever", 1, nil, logWrite("forever", "equal")))
	assert.Equal(t, time.Duration(-1), pttl("forever"), "a TTL does not make a permanent fence expire")
	require.NoError(t, f.Do(ctx, "forever", 2, nil, logWrite("forever", "higher")))
	assert.Equal(t, time.Duration(-1), pttl("forever"), "nor does a higher token")
	assert.Equal(t, "2", fenceValue(t, c, "forever"))

	require.NoError(t, f.Do(ctx, "expiring", 1, nil, logWrite("expiring", "x")))
	assert.InDelta(t, float64(90*time.Second), float64(pttl("expiring")), float64(slack), "1.5 × the TTL")
	require.NoError(t, c.PExpire(ctx, fenceOf("expiring"), 70*time.Second).Err())
	require.NoError(t, f.Do(ctx, "expiring", 1, nil, logWrite("expiring", "y")))
	assert.InDelta(t, float64(90*time.Second), float64(pttl("expiring")), float64(slack), "less than 1.25 × the TTL left: set again")
	require.NoError(t, c.PExpire(ctx, fenceOf("expiring"), 85*time.Second).Err())
	require.NoError(t, f.Do(ctx, "expiring", 1, nil, logWrite("expiring", "z")))
	assert.InDelta(t, float64(85*time.Second), float64(pttl("expiring")), float64(slack), "more left: left alone")
	require.NoError(t, f.Do(ctx, "expiring", 2, nil, logWrite("expiring", "raised")))
	assert.InDelta(t, float64(90*time.Second), float64(pttl("expiring")), float64(slack), "a higher token sets it again")

	require.NoError(t, c.Set(ctx, fenceOf("long"), "1", time.Hour).Err())
	require.NoError(t, f.Do(ctx, "long", 2, nil, logWrite("long", "x")))
	assert.InDelta(t, float64(time.Hour), float64(pttl("long")), float64(slack), "a longer TTL left is kept")
	require.NoError(t, permanent.Do(ctx, "long", 2, nil, logWrite("long", "y")))
	assert.Equal(t, time.Duration(-1), pttl("long"), "a Fence without a TTL makes the fence permanent")
}

// TestEqualTokensDoNotContend: writers sharing a token, all between their
// read of the fence and their EXEC at once, are all applied in one attempt
// each: none rewrites the fence key, so none breaks another's WATCH.
func TestEqualTokensDoNotContend(t *testing.T) {
	t.Parallel()
	_, srv := redistest.Redis(t)
	ctx := context.Background()
	const writers = 32
	// A connection per writer: each holds one for its WATCH until all meet.
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 2 * writers, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	for _, tc := range []struct {
		name    string
		watcher redisfence.Watcher
		opts    []redisfence.Option
	}{
		{"standalone", c, nil},
		{"routed", routed{c}, nil},
		{"with a TTL", c, []redisfence.Option{redisfence.WithFenceTTL(time.Minute)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFence(t, tc.watcher, append(tc.opts, redisfence.WithAttempts(1))...)
			res := "equal/" + tc.name
			require.NoError(t, f.Do(ctx, res, 7, nil, logWrite(res, "first")))
			var (
				met     sync.WaitGroup // every writer has read the fence and is in fn
				errs    = make([]error, writers)
				writing sync.WaitGroup
			)
			met.Add(writers)
			for i := range writers {
				writing.Go(func() {
					// A writer that fails before fn still lets the others
					// go on, so that the test fails on its error, not hangs.
					arrive := sync.OnceFunc(met.Done)
					defer arrive()
					errs[i] = f.Do(ctx, res, 7, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
						arrive()
						met.Wait()
						return logWrite(res, strconv.Itoa(i))(ctx, tx, pipe)
					})
				})
			}
			writing.Wait()
			contended := 0
			for _, err := range errs {
				if errors.Is(err, redisfence.ErrContended) {
					contended++
					continue
				}
				assert.NoError(t, err)
			}
			assert.Zero(t, contended, "writers with one token knocked each other out")
			assert.Len(t, logOf(t, c, res), writers+1)
			assert.Equal(t, "7", fenceValue(t, c, res))
		})
	}
}
