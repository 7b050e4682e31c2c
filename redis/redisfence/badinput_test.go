package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/redis/redisfence"
)

// caseBound is the most a case may take: its ctx deadline. Safely waits a
// little longer before it calls the case hung.
const caseBound = 5 * time.Second

// maxMsg bounds every error message: no error echoes a huge argument.
const maxMsg = 512

// built is New's error for the cases New must refuse; a Fence returned
// beside it is an error that matches no sentinel.
func built(f *redisfence.Fence, err error) error {
	if err != nil && f != nil {
		return fmt.Errorf("New returned a Fence beside its error %q", err.Error())
	}
	return err
}

// must is New's Fence for the cases New must accept, inside a case's call
// (not the test's goroutine): an error panics, which Safely reports.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("New: %v", err))
	}
	return v
}

// TestBadInput: Do, given bad input or an unusable Fence, returns an error
// matching a documented sentinel, or a wrapped server or context error;
// never a panic, never past the caller's deadline, and for bad arguments
// never a dial or a command.
func TestBadInput(t *testing.T) {
	live, _ := redistest.Redis(t)
	ctx0 := context.Background()
	nop := func(context.Context, *redis.Tx, redis.Pipeliner) error { return nil }
	var nilCtx context.Context // a nil ctx, spelt so that linters let it through

	long := strings.Repeat("é", redisfence.MaxResourceLen/2) // exactly the limit, in 2-byte runes
	require.Len(t, long, redisfence.MaxResourceLen)
	huge := strings.Repeat("x", 1<<20)
	cancelled, cancel := context.WithCancel(ctx0)
	cancel()
	refused := redis.NewClient(&redis.Options{Addr: testutil.RefusedAddr(t), MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { _ = refused.Close() })
	silent := redis.NewClient(&redis.Options{Addr: testutil.SilentServer(t), MaxRetries: -1, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = silent.Close() })

	cases := []struct {
		name string
		// call makes the call under test; dead is a client that counts
		// every dial and command, and must see none of them.
		call func(ctx context.Context, dead *redis.Client) error
		want error    // errors.Is target; nil with no msg: must succeed
		msg  []string // substrings of the message
	}{
		// The client and the Fence.
		{"nil client", func(ctx context.Context, _ *redis.Client) error {
			return built(redisfence.New(nil))
		}, redisfence.ErrInvalid, []string{"nil redis client"}},
		{"typed nil *redis.Client", func(ctx context.Context, _ *redis.Client) error {
			return built(redisfence.New((*redis.Client)(nil)))
		}, redisfence.ErrInvalid, []string{"*redis.Client"}},
		{"typed nil *redis.ClusterClient", func(ctx context.Context, _ *redis.Client) error {
			return built(redisfence.New((*redis.ClusterClient)(nil)))
		}, redisfence.ErrInvalid, []string{"*redis.ClusterClient"}},
		{"*redis.Ring", func(ctx context.Context, _ *redis.Client) error {
			// A Ring moves a down shard's keys to another: no fence there.
			ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": testutil.RefusedAddr(t)}})
			defer func() { _ = ring.Close() }()
			return built(redisfence.New(ring))
		}, redisfence.ErrInvalid, []string{"*redis.Ring"}},
		{"nil Fence", func(ctx context.Context, _ *redis.Client) error {
			return (*redisfence.Fence)(nil).Do(ctx, "r", 1, nil, nop)
		}, redisfence.ErrInvalid, nil},
		{"zero Fence", func(ctx context.Context, _ *redis.Client) error {
			return new(redisfence.Fence).Do(ctx, "r", 1, nil, nop)
		}, redisfence.ErrInvalid, []string{"New"}},

		// The context and fn.
		{"nil ctx", func(_ context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(nilCtx, "r", 1, nil, nop)
		}, redisfence.ErrInvalid, nil},
		{"cancelled ctx", func(_ context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(cancelled, "r", 1, nil, nop)
		}, context.Canceled, nil},
		{"expired ctx", func(ctx context.Context, dead *redis.Client) error {
			ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel()
			return must(redisfence.New(dead)).Do(ctx, "r", 1, nil, nop)
		}, context.DeadlineExceeded, nil},
		{"nil fn", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "r", 1, nil, nil)
		}, redisfence.ErrInvalid, []string{"nil fn"}},

		// The resource.
		{"empty resource", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "", 1, nil, nop)
		}, redisfence.ErrInvalid, nil},
		{"resource one byte over the limit", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, long+"x", 1, nil, nop)
		}, redisfence.ErrInvalid, []string{"1025 bytes", "limit of 1024"}},
		{"1 MB resource", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, huge, 1, nil, nop)
		}, redisfence.ErrInvalid, []string{"1048576 bytes"}},
		{"NUL in resource", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "a\x00b", 1, nil, nop)
		}, redisfence.ErrInvalid, []string{"NUL"}},
		{"invalid UTF-8 resource", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "a\xffb", 1, nil, nop)
		}, redisfence.ErrInvalid, []string{"UTF-8"}},
		{"resource at the limit is accepted", func(ctx context.Context, _ *redis.Client) error {
			return must(redisfence.New(live)).Do(ctx, long, 1, nil, nop)
		}, nil, nil},
		{"resource with braces is accepted", func(ctx context.Context, _ *redis.Client) error {
			res := "a{b}c"
			return must(redisfence.New(live)).Do(ctx, res, 1, []string{"data:" + redisfence.Tag(res)}, nop)
		}, nil, nil},
		{"stale token on a long resource: the message clips it", func(ctx context.Context, _ *redis.Client) error {
			res := "s" + strings.Repeat("ü", redisfence.MaxResourceLen/2-1)
			if err := must(redisfence.New(live)).Do(ctx, res, 5, nil, nop); err != nil {
				return err
			}
			return must(redisfence.New(live)).Do(ctx, res, 4, nil, nop)
		}, redisfence.ErrStaleToken, []string{`"süü`, `ü..."`}},

		// The token.
		{"negative token", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "r", -1, nil, nop)
		}, redisfence.ErrInvalid, []string{"-1"}},
		{"MinInt64 token", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "r", math.MinInt64, nil, nop)
		}, redisfence.ErrInvalid, nil},
		{"token 0 is accepted", func(ctx context.Context, _ *redis.Client) error {
			return must(redisfence.New(live)).Do(ctx, "zero", 0, nil, nop)
		}, nil, nil},
		{"MaxInt64 token is accepted, and recorded exactly", func(ctx context.Context, _ *redis.Client) error {
			if err := must(redisfence.New(live)).Do(ctx, "max", math.MaxInt64, nil, nop); err != nil {
				return err
			}
			if v := live.Get(ctx, fenceOf("max")).Val(); v != fmt.Sprint(int64(math.MaxInt64)) {
				return fmt.Errorf("recorded %s", v)
			}
			return must(redisfence.New(live)).Do(ctx, "max", math.MaxInt64-1, nil, nop)
		}, redisfence.ErrStaleToken, nil},

		// The keys.
		{"key outside the slot", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "acct", 1, []string{"n:{acct}", "n:acct"}, nop)
		}, redisfence.ErrInvalid, []string{`"n:acct"`, `"{acct}"`}},
		{"1 MB key outside the slot", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "acct", 1, []string{huge}, nop)
		}, redisfence.ErrInvalid, nil},
		{"empty key", func(ctx context.Context, dead *redis.Client) error {
			return must(redisfence.New(dead)).Do(ctx, "acct", 1, []string{""}, nop)
		}, redisfence.ErrInvalid, nil},

		// Options.
		{"empty prefix", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithPrefix("")))
		}, redisfence.ErrInvalid, []string{"empty prefix"}},
		{"prefix with a brace", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithPrefix("f{")))
		}, redisfence.ErrInvalid, []string{"brace"}},
		{"1 MB prefix", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithPrefix(huge)))
		}, redisfence.ErrInvalid, []string{"1048576 bytes"}},
		{"invalid UTF-8 prefix", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithPrefix("p\xff")))
		}, redisfence.ErrInvalid, []string{"UTF-8"}},
		{"fence TTL below 1s", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithFenceTTL(999*time.Millisecond)))
		}, redisfence.ErrInvalid, []string{"999ms"}},
		{"negative fence TTL", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithFenceTTL(-time.Hour)))
		}, redisfence.ErrInvalid, nil},
		{"0 attempts", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithAttempts(0)))
		}, redisfence.ErrInvalid, []string{"attempts 0"}},
		{"1001 attempts", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithAttempts(1001)))
		}, redisfence.ErrInvalid, nil},
		{"the first bad option is reported", func(ctx context.Context, dead *redis.Client) error {
			return built(redisfence.New(dead, redisfence.WithAttempts(0), redisfence.WithPrefix("")))
		}, redisfence.ErrInvalid, []string{"attempts 0"}},
		{"nil option is ignored; a custom prefix is used", func(ctx context.Context, _ *redis.Client) error {
			if err := must(redisfence.New(live, nil, redisfence.WithPrefix("mine:"), nil)).Do(ctx, "p", 3, nil, nop); err != nil {
				return err
			}
			if v := live.Get(ctx, "mine:{p}").Val(); v != "3" {
				return fmt.Errorf("mine:{p} holds %q", v)
			}
			return nil
		}, nil, nil},

		// fn misusing what it is given.
		{"fn executes pipe", func(ctx context.Context, _ *redis.Client) error {
			return must(redisfence.New(live)).Do(ctx, "exec", 1, nil, func(ctx context.Context, _ *redis.Tx, pipe redis.Pipeliner) error {
				pipe.Set(ctx, "x:{exec}", 1, 0)
				_, err := pipe.Exec(ctx)
				return err
			})
		}, redisfence.ErrInvalid, []string{"executed pipe"}},
		{"fn runs pipe.TxPipelined", func(ctx context.Context, _ *redis.Client) error {
			err := must(redisfence.New(live)).Do(ctx, "txp", 1, nil, func(ctx context.Context, _ *redis.Tx, pipe redis.Pipeliner) error {
				_, _ = pipe.TxPipeline().TxPipelined(ctx, func(p redis.Pipeliner) error {
					p.Set(ctx, "x:{txp}", 1, 0)
					return nil
				})
				return nil
			})
			if live.Exists(ctx, "x:{txp}", fenceOf("txp")).Val() != 0 {
				return errors.New("written")
			}
			return err
		}, redisfence.ErrInvalid, nil},

		// What the server holds and says.
		{"fence key holds no token", func(ctx context.Context, _ *redis.Client) error {
			live.Set(ctx, fenceOf("garbage"), "not a number", 0)
			return must(redisfence.New(live)).Do(ctx, "garbage", 1, nil, nop)
		}, nil, []string{"not a token", "not a number"}},
		{"fence key holds a negative number", func(ctx context.Context, _ *redis.Client) error {
			live.Set(ctx, fenceOf("negative"), "-5", 0)
			return must(redisfence.New(live)).Do(ctx, "negative", 1, nil, nop)
		}, nil, []string{"not a token"}},
		{"fence key of another type", func(ctx context.Context, _ *redis.Client) error {
			live.RPush(ctx, fenceOf("list"), "x")
			return must(redisfence.New(live)).Do(ctx, "list", 1, nil, nop)
		}, nil, []string{"WRONGTYPE", "read fence"}},
		{"connection refused", func(ctx context.Context, _ *redis.Client) error {
			return must(redisfence.New(refused)).Do(ctx, "r", 1, nil, nop)
		}, syscall.ECONNREFUSED, []string{"redisfence"}},
		{"silent server: Do ends at the deadline", func(ctx context.Context, _ *redis.Client) error {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			start := time.Now()
			err := must(redisfence.New(silent)).Do(ctx, "r", 1, nil, nop)
			if d := time.Since(start); d > time.Second {
				return fmt.Errorf("returned after %v: %w", d, err)
			}
			var netErr net.Error
			if !errors.As(err, &netErr) || !netErr.Timeout() {
				return fmt.Errorf("not a timeout: %w", err)
			}
			return nil
		}, nil, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dead, calls := redistest.DeadClient(t)
			ctx, cancel := context.WithTimeout(ctx0, caseBound)
			defer cancel()
			err := testutil.Safely(t, caseBound+2*time.Second, func() error { return tc.call(ctx, dead) })
			assert.Zero(t, calls.N(), "the dead client was dialled or sent a command")
			if tc.want == nil && len(tc.msg) == 0 {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.LessOrEqual(t, len(err.Error()), maxMsg, "message too long: %.200s...", err.Error())
			if tc.want != nil {
				assert.ErrorIs(t, err, tc.want)
			}
			for _, s := range []error{redisfence.ErrInvalid, redisfence.ErrStaleToken, redisfence.ErrContended} {
				if s != tc.want {
					assert.NotErrorIs(t, err, s)
				}
			}
			for _, s := range tc.msg {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
}
