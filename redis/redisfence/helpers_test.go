package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/redisfence"
)

// routed hides a *redis.Client's type, so that Do takes the path of the
// clients that route by key (Cluster, Ring): the client's Watch sends
// WATCH on its own, before the fence is read.
type routed struct{ *redis.Client }

// target is a deployment the tests run on: client reads and writes
// directly, watcher is what the Fence is given.
type target struct {
	name    string
	client  redis.UniversalClient
	watcher redisfence.Watcher
	// narrow returns a client of one connection (per node), and its
	// watcher: a WATCH left behind on it would fail the next MULTI.
	narrow func(t *testing.T) (redis.UniversalClient, redisfence.Watcher)
}

// targets starts a private redis-server, used directly (WATCH in one round
// trip with the fence's read) and through routed, and a 3-master Cluster.
func targets(t *testing.T) []target {
	t.Helper()
	c, srv := redistest.Redis(t)
	cl := redistest.RedisCluster(t, 3)
	addrs := make([]string, len(cl.Masters))
	for i, m := range cl.Masters {
		addrs[i] = m.Addr()
	}
	single := func(t *testing.T) *redis.Client {
		c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 1, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	return []target{
		{"standalone", c, c, func(t *testing.T) (redis.UniversalClient, redisfence.Watcher) {
			c := single(t)
			return c, c
		}},
		{"routed", c, routed{c}, func(t *testing.T) (redis.UniversalClient, redisfence.Watcher) {
			c := single(t)
			return c, routed{c}
		}},
		{"cluster", cl.Client, cl.Client, func(t *testing.T) (redis.UniversalClient, redisfence.Watcher) {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 1, ContextTimeoutEnabled: true})
			t.Cleanup(func() { _ = c.Close() })
			return c, c
		}},
	}
}

// forEach runs fn as a subtest on each target, with resources of its own
// (prefix), so that subtests on one server do not meet. The test runs in
// parallel with the other forEach tests: their servers are their own, and
// most of their time is the Cluster's start.
func forEach(t *testing.T, fn func(t *testing.T, tg target, prefix string)) {
	t.Parallel()
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) { fn(t, tg, tg.name+"/") })
	}
}

// newFence is redisfence.New for input it must accept: an error fails the
// test.
func newFence(t testing.TB, client redisfence.Watcher, opts ...redisfence.Option) *redisfence.Fence {
	t.Helper()
	f, err := redisfence.New(client, opts...)
	require.NoError(t, err)
	require.NotNil(t, f)
	return f
}

func key(name, resource string) string { return name + ":" + redisfence.Tag(resource) }

func fenceOf(resource string) string {
	return redisfence.DefaultPrefix + redisfence.Tag(resource)
}

// logWrite appends entry to resource's log and does nothing else.
func logWrite(resource, entry string) func(context.Context, *redis.Tx, redis.Pipeliner) error {
	return func(ctx context.Context, _ *redis.Tx, pipe redis.Pipeliner) error {
		pipe.RPush(ctx, key("log", resource), entry)
		return nil
	}
}

func logOf(t *testing.T, c redis.UniversalClient, resource string) []string {
	t.Helper()
	out, err := c.LRange(context.Background(), key("log", resource), 0, -1).Result()
	require.NoError(t, err)
	return out
}

// fenceValue is the token recorded for resource, or "" when none is.
func fenceValue(t *testing.T, c redis.UniversalClient, resource string) string {
	t.Helper()
	v, err := c.Get(context.Background(), fenceOf(resource)).Result()
	if errors.Is(err, redis.Nil) {
		return ""
	}
	require.NoError(t, err)
	return v
}

// outcomes of a concurrent run.
type outcomes struct {
	mu        sync.Mutex
	accepted  map[string]string // tag -> resource
	rejected  map[string]bool   // stale or contended: must have left nothing
	stale     int
	contended int
	runs      atomic.Int64 // of fn: more than the writes that got past the fence when races were lost
	problems  []string     // anything the run saw go wrong
	more      int          // problems seen, listed or not
}

// problem notes what went wrong; beyond maxProblems, only how many more.
func (o *outcomes) problem(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.more++
	if o.more <= maxProblems {
		o.problems = append(o.problems, fmt.Sprintf(format, args...))
	}
}

const maxProblems = 20

// concurrentWriters runs 32 goroutines of 20 writes each over 4 resources.
// Each write, under the fence, adds one to the resource's counter, half of
// them as a read-modify-write (GET through tx, the key in keys, SET on
// pipe) and half blind (INCR, no keys, so only the fence's WATCH orders
// it), and appends its token and tag to the resource's log in the same
// MULTI: the log is the commit order, independent of the fence. Tokens
// grow with the write's index, with overlap, so that writers of one
// resource race with close tokens. It returns what went wrong: accepted
// tokens that decrease in commit order, a write whose effect is missing,
// doubled or lost (the counter and the log's length disagree), a rejected
// write that left something, or an unexpected error.
func concurrentWriters(t *testing.T, tg target, f *redisfence.Fence, prefix string) []string {
	t.Helper()
	ctx := context.Background()
	resources := []string{prefix + "a", prefix + "b", prefix + "c", prefix + "d"}
	o := &outcomes{accepted: map[string]string{}, rejected: map[string]bool{}}
	const goroutines, perG = 32, 20
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 24))
			for i := range perG {
				res := resources[rng.IntN(len(resources))]
				tok := int64(i)*10 + rng.Int64N(40)
				tag := fmt.Sprintf("%d/%d", g, i)
				counter, log := key("n", res), key("log", res)
				entry := strconv.FormatInt(tok, 10) + " " + tag
				var (
					before int64         // the counter read: read-modify-write
					incr   *redis.IntCmd // the counter's INCR: blind
					length *redis.IntCmd
					keys   []string
				)
				rmw := rng.IntN(2) == 0
				if rmw {
					keys = []string{counter}
				}
				err := f.Do(ctx, res, tok, keys, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
					o.runs.Add(1)
					if rmw {
						n, err := tx.Get(ctx, counter).Int64()
						if err != nil && !errors.Is(err, redis.Nil) {
							return err
						}
						before = n
						pipe.Set(ctx, counter, n+1, 0)
					} else {
						incr = pipe.Incr(ctx, counter)
					}
					length = pipe.RPush(ctx, log, entry)
					return nil
				})
				var stale *redisfence.StaleTokenError
				switch {
				case err == nil:
					want := before + 1
					if !rmw {
						want = incr.Val()
					}
					if length.Val() != want {
						o.problem("%s on %s: the counter became %d, the log %d long", tag, res, want, length.Val())
					}
					o.mu.Lock()
					o.accepted[tag] = res
					o.mu.Unlock()
				case errors.As(err, &stale):
					if stale.Highest <= stale.Token {
						o.problem("%s: a rejection names no higher token: %v", tag, err)
					}
					o.mu.Lock()
					o.stale++
					o.rejected[tag] = true
					o.mu.Unlock()
				case errors.Is(err, redisfence.ErrContended):
					o.mu.Lock()
					o.contended++
					o.rejected[tag] = true
					o.mu.Unlock()
				default:
					o.problem("Do(%s, %d): unexpected error %v", res, tok, err)
				}
			}
		})
	}
	wg.Wait()

	total := 0
	for _, res := range resources {
		entries := logOf(t, tg.client, res)
		n, err := tg.client.Get(ctx, key("n", res)).Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			require.NoError(t, err)
		}
		if int(n) != len(entries) {
			o.problem("%s: counter %d, log of %d", res, n, len(entries))
		}
		last := int64(-1)
		seen := map[string]bool{}
		for _, e := range entries {
			tokS, tag, _ := strings.Cut(e, " ")
			tok, _ := strconv.ParseInt(tokS, 10, 64)
			if tok < last {
				o.problem("%s: token %d committed after %d", res, tok, last)
			}
			last = tok
			switch {
			case seen[tag]:
				o.problem("%s: write %s applied twice", res, tag)
			case o.rejected[tag]:
				o.problem("%s: rejected write %s left its entry", res, tag)
			case o.accepted[tag] != res:
				o.problem("%s: entry %s of no accepted write", res, tag)
			}
			seen[tag] = true
		}
		total += len(entries)
		if len(entries) > 0 {
			if fence := fenceValue(t, tg.client, res); fence != strconv.FormatInt(last, 10) {
				o.problem("%s: fence %s, last token in the log %d", res, fence, last)
			}
		}
	}
	if total != len(o.accepted) {
		o.problem("%d accepted writes, %d entries", len(o.accepted), total)
	}
	if got := len(o.accepted) + len(o.rejected); got != goroutines*perG {
		o.problem("%d outcomes for %d writes", got, goroutines*perG)
	}
	if o.stale == 0 {
		o.problem("no stale write: the tokens do not race")
	}
	if o.more > maxProblems {
		o.problems = append(o.problems, fmt.Sprintf("... and %d more", o.more-maxProblems))
	}
	t.Logf("%s: %d accepted, %d stale, %d contended; fn ran %d times", tg.name, len(o.accepted), o.stale, o.contended, o.runs.Load())
	return o.problems
}
