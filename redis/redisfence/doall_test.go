package redisfence_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
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

// oneSlot returns n resources starting with prefix whose fence keys share
// one hash slot, as DoAll over a Cluster needs.
func oneSlot(prefix string, n int) []string {
	bySlot := map[int][]string{}
	for i := 0; ; i++ {
		res := prefix + "acct-" + strconv.Itoa(i)
		s := redisfence.Slot(fenceOf(res))
		bySlot[s] = append(bySlot[s], res)
		if len(bySlot[s]) == n {
			return bySlot[s]
		}
	}
}

// claimsOf claims each resource with token.
func claimsOf(token int64, resources ...string) []redisfence.Claim {
	cs := make([]redisfence.Claim, len(resources))
	for i, r := range resources {
		cs[i] = redisfence.Claim{Resource: r, Token: token}
	}
	return cs
}

// move is a DoAll fn that moves amount between two balances it reads
// through tx, in the caller's order.
func move(from, to string, amount int64) func(context.Context, *redis.Tx, redis.Pipeliner) error {
	return func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
		a, err := tx.Get(ctx, from).Int64()
		if err != nil {
			return err
		}
		b, err := tx.Get(ctx, to).Int64()
		if err != nil {
			return err
		}
		pipe.Set(ctx, from, a-amount, 0)
		pipe.Set(ctx, to, b+amount, 0)
		return nil
	}
}

// TestDoAllOppositeOrders: transfers between four balances, each a DoAll
// over both accounts, in pairs released together that name them in
// opposite orders, all apply, each once: no error, and the sum holds.
// Redis takes no locks, so the order of the claims cannot deadlock it;
// the canonical order's mutation shows nothing here (it is the SQL
// stores' test). What this shows is that reads and writes of both
// accounts are one atomic step.
func TestDoAllOppositeOrders(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		f := newFence(t, tg.watcher, redisfence.WithAttempts(1000))
		accounts := oneSlot(p, 4)
		bal := func(res string) string { return key("bal", res) }
		for _, a := range accounts {
			require.NoError(t, tg.client.Set(ctx, bal(a), 100, 0).Err())
		}
		var (
			mu   sync.Mutex
			errs []error
			wg   sync.WaitGroup
		)
		for pair := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(pair), 37))
				for range 25 {
					i := rng.IntN(4)
					a, b := accounts[i], accounts[(i+1+rng.IntN(3))%4]
					start := make(chan struct{})
					var round sync.WaitGroup
					for _, c := range [][2]string{{a, b}, {b, a}} {
						round.Go(func() {
							<-start
							err := f.DoAll(ctx, claimsOf(1, c[0], c[1]), []string{bal(c[0]), bal(c[1])}, move(bal(c[0]), bal(c[1]), 1))
							if err != nil {
								mu.Lock()
								errs = append(errs, err)
								mu.Unlock()
							}
						})
					}
					close(start)
					round.Wait()
				}
			})
		}
		wg.Wait()
		assert.Zero(t, len(errs), "errors, such as: %v", errors.Join(errs[:min(3, len(errs))]...))
		var sum int64
		for _, a := range accounts {
			n, err := tg.client.Get(ctx, bal(a)).Int64()
			require.NoError(t, err)
			sum += n
		}
		assert.Equal(t, int64(400), sum, "money appeared or vanished")
	})
}

// TestDoAllOneStaleClaimRefusesAll: whichever claim is stale, first, in the
// middle or last in canonical order, DoAll returns the error Do would for
// that claim alone, fn never runs, and nothing is applied: no write, and
// no token of the other claims, though they were higher. Mutation: check
// only the first claim, and the middle and last cases apply.
func TestDoAllOneStaleClaimRefusesAll(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		f := newFence(t, tg.watcher)
		resources := oneSlot(p+"stale/", 3)
		for _, r := range resources {
			require.NoError(t, f.Do(ctx, r, 5, nil, logWrite(r, "seed")))
		}
		for _, stale := range resources {
			var claims []redisfence.Claim
			for i := range resources { // the caller's order: reversed
				r := resources[len(resources)-1-i]
				tok := int64(6)
				if r == stale {
					tok = 4
				}
				claims = append(claims, redisfence.Claim{Resource: r, Token: tok})
			}
			called := false
			err := f.DoAll(ctx, claims, nil, func(ctx context.Context, tx *redis.Tx, pipe redis.Pipeliner) error {
				called = true
				for _, r := range resources {
					_ = logWrite(r, "all")(ctx, tx, pipe)
				}
				return nil
			})
			var se *redisfence.StaleTokenError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, redisfence.StaleTokenError{Resource: stale, Token: 4, Highest: 5}, *se)
			assert.Equal(t, f.Do(ctx, stale, 4, nil, logWrite(stale, "alone")).Error(), err.Error(), "the error a single stale claim gives")
			assert.False(t, called, "fn ran (stale %s)", stale)
			for _, r := range resources {
				assert.Equal(t, []string{"seed"}, logOf(t, tg.client, r), "a write was applied (stale %s)", stale)
				assert.Equal(t, "5", fenceValue(t, tg.client, r), "a token was recorded (stale %s)", stale)
			}
		}
		// All current: every token is recorded with fn's writes.
		a, b := resources[0], resources[1]
		require.NoError(t, f.DoAll(ctx, []redisfence.Claim{{Resource: b, Token: 7}, {Resource: a, Token: 5}, {Resource: b, Token: 7}},
			[]string{key("log", a)}, logWrite(a, "ok")))
		assert.Equal(t, []string{"seed", "ok"}, logOf(t, tg.client, a))
		assert.Equal(t, []string{"5", "7"}, []string{fenceValue(t, tg.client, a), fenceValue(t, tg.client, b)})
	})
}

// TestDoAllConcurrentWritersCommitInTokenOrder: 16 writers, each DoAll
// over two of four resources with racing tokens, append their token to
// each resource's log in the same MULTI: every resource's log, the commit
// order, never goes back to a lower token, and its fence is its log's last.
// Mutation: WATCH only the first fence key, and a writer that read the
// second before a higher token was recorded there commits behind it.
func TestDoAllConcurrentWritersCommitInTokenOrder(t *testing.T) {
	forEach(t, func(t *testing.T, tg target, p string) {
		ctx := context.Background()
		f := newFence(t, tg.watcher, redisfence.WithAttempts(1000))
		resources := oneSlot(p+"order/", 4)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 41))
				for i := range 15 {
					j := rng.IntN(4)
					a, b := resources[j], resources[(j+1+rng.IntN(3))%4]
					tok := int64(i)*10 + rng.Int64N(40)
					err := f.DoAll(ctx, claimsOf(tok, a, b), nil, func(ctx context.Context, _ *redis.Tx, pipe redis.Pipeliner) error {
						pipe.RPush(ctx, key("log", a), tok)
						pipe.RPush(ctx, key("log", b), tok)
						return nil
					})
					if err != nil && !errors.Is(err, redisfence.ErrStaleToken) {
						t.Errorf("DoAll: %v", err)
					}
				}
			})
		}
		wg.Wait()
		for _, r := range resources {
			entries := logOf(t, tg.client, r)
			last := int64(-1)
			for _, e := range entries {
				tok, err := strconv.ParseInt(e, 10, 64)
				require.NoError(t, err)
				assert.GreaterOrEqual(t, tok, last, "%s: token %d committed after %d", r, tok, last)
				last = max(last, tok)
			}
			if len(entries) > 0 {
				assert.Equal(t, strconv.FormatInt(last, 10), fenceValue(t, tg.client, r))
			}
		}
	})
}

// TestDoAllSlots: a key must share the slot of a claimed resource's fence,
// on every deployment; over a client that routes by key, the resources'
// fences must share one slot. Both are refused before any command; a
// *redis.Client takes resources in any slots.
func TestDoAllSlots(t *testing.T) {
	t.Parallel()
	live, _ := redistest.Redis(t)
	ctx := context.Background()
	a, b := "slots/a", "slots/b"
	require.NotEqual(t, redisfence.Slot(fenceOf(a)), redisfence.Slot(fenceOf(b)))
	require.NotContains(t, []int{redisfence.Slot(fenceOf(a)), redisfence.Slot(fenceOf(b))}, redisfence.Slot("elsewhere"))
	nop := func(context.Context, *redis.Tx, redis.Pipeliner) error { return nil }

	require.NoError(t, newFence(t, live).DoAll(ctx, claimsOf(1, a, b), []string{key("log", a), key("log", b)}, logWrite(b, "x")))
	assert.Equal(t, []string{"1", "1"}, []string{fenceValue(t, live, a), fenceValue(t, live, b)})

	for name, tc := range map[string]struct {
		routed bool
		keys   []string
		msg    []string
	}{
		"resources in two slots, routed": {true, nil, []string{`"slots/a"`, `"slots/b"`, "one slot"}},
		"a key in no claimed slot":       {false, []string{key("log", a), "elsewhere"}, []string{`"elsewhere"`, "Tag"}},
	} {
		t.Run(name, func(t *testing.T) {
			dead, calls := redistest.DeadClient(t)
			var w redisfence.Watcher = dead
			if tc.routed {
				w = routed{dead}
			}
			err := newFence(t, w).DoAll(ctx, claimsOf(1, a, b), tc.keys, nop)
			require.ErrorIs(t, err, redisfence.ErrInvalid)
			for _, m := range tc.msg {
				assert.Contains(t, err.Error(), m)
			}
			assert.Zero(t, calls.N(), "a command was sent")
		})
	}
}

// TestDoAllBadInput: bad claims, fn, ctx or Fence are ErrInvalid, and no
// command reaches Redis.
func TestDoAllBadInput(t *testing.T) {
	nop := func(context.Context, *redis.Tx, redis.Pipeliner) error { return nil }
	var nilCtx context.Context
	ok := claimsOf(1, "a", "b")
	for _, tc := range []struct {
		name string
		call func(ctx context.Context, dead *redis.Client) error
		msg  string
	}{
		{"nil claims", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).DoAll(ctx, nil, nil, nop)
		}, "no claims"},
		{"one resource, two tokens", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).DoAll(ctx, []redisfence.Claim{{Resource: "a", Token: 1}, {Resource: "a", Token: 2}}, nil, nop)
		}, `resource "a" claimed with two tokens, 1 and 2`},
		{"empty resource", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).DoAll(ctx, []redisfence.Claim{{Resource: "a", Token: 1}, {Resource: "", Token: 1}}, nil, nop)
		}, "empty resource (claim 1)"},
		{"negative token", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).DoAll(ctx, claimsOf(-1, "a"), nil, nop)
		}, "negative token -1 (claim 0)"},
		{"resource over the limit", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).DoAll(ctx, claimsOf(1, strings.Repeat("r", redisfence.MaxResourceLen+1)), nil, nop)
		}, "limit of 1024"},
		{"nil fn", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).DoAll(ctx, ok, nil, nil)
		}, "nil fn"},
		{"nil ctx", func(_ context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).DoAll(nilCtx, ok, nil, nop)
		}, "nil context"},
		{"nil Fence", func(ctx context.Context, _ *redis.Client) error {
			return (*redisfence.Fence)(nil).DoAll(ctx, ok, nil, nop)
		}, "nil Fence"},
		{"bad option", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithAttempts(0)))
		}, "attempts 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dead, calls := redistest.DeadClient(t)
			ctx, cancel := context.WithTimeout(context.Background(), caseBound)
			defer cancel()
			err := testutil.Safely(t, caseBound+2*time.Second, func() error { return tc.call(ctx, dead) })
			require.ErrorIs(t, err, redisfence.ErrInvalid)
			assert.Contains(t, err.Error(), tc.msg)
			assert.Zero(t, calls.N(), "the dead client was dialled or sent a command")
		})
	}
}
