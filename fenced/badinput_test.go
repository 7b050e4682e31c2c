package fenced_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/testutil"
)

// spy stands in for the database in the cases that must not reach it: as a
// Beginner and as a pgx.Tx it counts every call that would (Begin, Exec,
// QueryRow) and fails it. Any other pgx.Tx method panics on the nil
// embedded Tx, which the harness reports as a failure.
type spy struct {
	pgx.Tx
	calls atomic.Int64
}

var errSpy = errors.New("spy: no database here")

func (s *spy) Begin(context.Context) (pgx.Tx, error) {
	s.calls.Add(1)
	return nil, errSpy
}

func (s *spy) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	s.calls.Add(1)
	return pgconn.CommandTag{}, errSpy
}

func (s *spy) QueryRow(context.Context, string, ...any) pgx.Row {
	s.calls.Add(1)
	return errRow{}
}

type errRow struct{}

func (errRow) Scan(...any) error { return errSpy }

// badCase is one input and the error it must produce. With want, code and
// msg all empty the call must succeed.
type badCase struct {
	name string
	// call makes the call under test. ctx ends after caseBound; sp is a
	// fresh spy, which the cases that must not reach the database use as
	// the database (the harness asserts it saw no call, in every case).
	call func(ctx context.Context, sp *spy) error
	want error    // errors.Is target
	code string   // SQLSTATE the error must carry (errors.As *pgconn.PgError)
	msg  []string // substrings of the message
	// within, when set, is how soon the call must return: before caseBound,
	// for the cases that end on a shorter deadline of their own.
	within time.Duration
}

// caseBound is the most a case may take: its ctx deadline. The harness
// waits a little longer before it calls the case hung.
const caseBound = 5 * time.Second

// maxMsg bounds every error message: no error echoes a huge argument.
const maxMsg = 512

func runBadCase(t *testing.T, tc badCase) {
	t.Helper()
	sp := &spy{}
	ctx, cancel := context.WithTimeout(context.Background(), caseBound)
	defer cancel()
	type result struct {
		err      error
		panicked any
		stack    []byte
	}
	done := make(chan result, 1)
	late := testutil.MeasureLateness(t)
	start := time.Now()
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{panicked: r, stack: debug.Stack()}
			}
		}()
		done <- result{err: tc.call(ctx, sp)}
	}()
	var r result
	select {
	case r = <-done:
	case <-time.After(caseBound + 2*time.Second):
		t.Fatalf("hung: no return %v past the ctx deadline", 2*time.Second)
	}
	elapsed := time.Since(start)
	require.Nil(t, r.panicked, "panicked: %v\n%s", r.panicked, r.stack)
	if tc.within > 0 {
		assert.Less(t, elapsed, late.Bound(tc.within), "returned late")
	}
	assert.Zero(t, sp.calls.Load(), "the database was called")

	err := r.err
	if tc.want == nil && tc.code == "" && len(tc.msg) == 0 {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	assert.LessOrEqual(t, len(err.Error()), maxMsg, "message too long: %.200s...", err.Error())
	if tc.want != nil {
		assert.ErrorIs(t, err, tc.want)
	}
	for _, s := range []error{fenced.ErrInvalid, fenced.ErrStaleToken, fenced.ErrNotMigrated} {
		if s != tc.want {
			assert.NotErrorIs(t, err, s)
		}
	}
	if tc.code != "" {
		var pgErr *pgconn.PgError
		if assert.ErrorAs(t, err, &pgErr) {
			assert.Equal(t, tc.code, pgErr.Code)
		}
	}
	for _, s := range tc.msg {
		assert.Contains(t, err.Error(), s)
	}
}

// built is New's error for the cases New must refuse; a Guard returned
// beside it is an error that matches no sentinel.
func built(g *fenced.Guard, err error) error {
	if err != nil && g != nil {
		return fmt.Errorf("New returned a Guard beside its error %q", err.Error())
	}
	return err
}

// must is New's Guard for the cases New must accept, inside a case's call
// (not the test's goroutine): an error panics, which the harness reports.
func must[T any](v T, err error) T {
	if err != nil {
		panic(fmt.Sprintf("New: %v", err))
	}
	return v
}

// lazyPool is a pool to url that connects on first use.
func lazyPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), url)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// TestBadInput: every exported function and option of fenced, given bad
// input, returns an error matching a documented sentinel or a wrapped
// server or context error; never a panic, never past the caller's deadline,
// and for bad arguments never a call to the database.
func TestBadInput(t *testing.T) {
	pool, live, fences, _ := setup(t)
	nop := func(context.Context, pgx.Tx) error { return nil }
	var nilCtx context.Context // a nil ctx, spelt so that linters let it through
	unmigrated := newGuard(t, pool, fenced.WithTable(fences+"_never"))

	closedPool := testutil.Postgres(t)
	closedPool.Close()
	closedConn, err := pgx.Connect(context.Background(), testutil.PostgresURL(t))
	require.NoError(t, err)
	require.NoError(t, closedConn.Close(context.Background()))
	// Nothing listens on port 1: the connection is refused at once.
	refused := lazyPool(t, "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable")
	silent := lazyPool(t, "postgres://postgres@"+testutil.SilentServer(t)+"/postgres?sslmode=disable")

	long := strings.Repeat("é", fenced.MaxResourceLen/2) // exactly the limit, in 2-byte runes
	require.Len(t, long, fenced.MaxResourceLen)
	huge := strings.Repeat("x", 1<<20)
	cancelled := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx
	}

	cases := []badCase{
		// The database: New refuses it.
		{name: "nil db", want: fenced.ErrInvalid, msg: []string{"nil database"}, call: func(context.Context, *spy) error {
			return built(fenced.New(nil))
		}},
		{name: "typed nil pool", want: fenced.ErrInvalid, msg: []string{"*pgxpool.Pool"}, call: func(context.Context, *spy) error {
			return built(fenced.New((*pgxpool.Pool)(nil)))
		}},
		{name: "typed nil conn", want: fenced.ErrInvalid, msg: []string{"*pgx.Conn"}, call: func(context.Context, *spy) error {
			return built(fenced.New((*pgx.Conn)(nil)))
		}},
		{name: "typed nil spy", want: fenced.ErrInvalid, msg: []string{"*fenced_test.spy"}, call: func(context.Context, *spy) error {
			return built(fenced.New((*spy)(nil)))
		}},
		{name: "typed nil db with a bad option", want: fenced.ErrInvalid, msg: []string{"nil database"}, call: func(context.Context, *spy) error {
			return built(fenced.New((*pgxpool.Pool)(nil), fenced.WithTable("")))
		}},

		// The Guard.
		{name: "nil Guard: Do", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return (*fenced.Guard)(nil).Do(ctx, "r", 1, nop)
		}},
		{name: "nil Guard: Migrate", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return (*fenced.Guard)(nil).Migrate(ctx)
		}},
		{name: "nil Guard: Check", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return (*fenced.Guard)(nil).Check(ctx, sp, "r", 1)
		}},
		{name: "zero Guard: Do", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return new(fenced.Guard).Do(ctx, "r", 1, nop)
		}},
		{name: "zero Guard: Migrate", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return new(fenced.Guard).Migrate(ctx)
		}},
		{name: "zero Guard: Check", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return new(fenced.Guard).Check(ctx, sp, "r", 1)
		}},

		// The context.
		{name: "nil ctx: Do", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(nilCtx, "r", 1, nop)
		}},
		{name: "nil ctx: Migrate", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return must(fenced.New(sp)).Migrate(nilCtx)
		}},
		{name: "nil ctx: Check", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return must(fenced.New(sp)).Check(nilCtx, sp, "r", 1)
		}},
		{name: "cancelled ctx: Do", want: context.Canceled, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(cancelled(ctx), "r", 1, nop)
		}},
		{name: "expired ctx: Migrate", want: context.DeadlineExceeded, call: func(ctx context.Context, sp *spy) error {
			ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel()
			return must(fenced.New(sp)).Migrate(ctx)
		}},
		{name: "cancelled ctx: Check", want: context.Canceled, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Check(cancelled(ctx), sp, "r", 1)
		}},

		// The resource.
		{name: "empty resource: Do", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(ctx, "", 1, nop)
		}},
		{name: "empty resource: Check", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Check(ctx, sp, "", 1)
		}},
		{name: "resource one byte over the limit", want: fenced.ErrInvalid, msg: []string{"1025 bytes", "limit of 1024"}, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(ctx, long+"x", 1, nop)
		}},
		{name: "3000-byte resource", want: fenced.ErrInvalid, msg: []string{"3000 bytes"}, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(ctx, strings.Repeat("r", 3000), 1, nop)
		}},
		{name: "1 MB resource: Do", want: fenced.ErrInvalid, msg: []string{"1048576 bytes", "limit of 1024"}, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(ctx, huge, 1, nop)
		}},
		{name: "1 MB resource: Check", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Check(ctx, sp, huge, 1)
		}},
		{name: "NUL in resource: Do", want: fenced.ErrInvalid, msg: []string{"NUL"}, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(ctx, "a\x00b", 1, nop)
		}},
		{name: "NUL in resource: Check", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Check(ctx, sp, "\x00", 1)
		}},
		{name: "invalid UTF-8 resource", want: fenced.ErrInvalid, msg: []string{"UTF-8"}, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(ctx, "a\xffb", 1, nop)
		}},
		{name: "resource at the limit is accepted", call: func(ctx context.Context, _ *spy) error {
			return live.Do(ctx, long, 1, nop)
		}},

		// The message quotes the resource clipped, at a rune boundary.
		{name: "stale token on a long resource", want: fenced.ErrStaleToken, msg: []string{`"süü`, `ü..."`}, call: func(ctx context.Context, _ *spy) error {
			res := "s" + strings.Repeat("ü", fenced.MaxResourceLen/2-1)
			if err := live.Do(ctx, res, 5, nop); err != nil {
				return err
			}
			return live.Do(ctx, res, 4, nop)
		}},

		// The token.
		{name: "negative token: Do", want: fenced.ErrInvalid, msg: []string{"-1"}, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(ctx, "r", -1, nop)
		}},
		{name: "MinInt64 token: Check", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Check(ctx, sp, "r", math.MinInt64)
		}},
		{name: "token 0 is accepted", call: func(ctx context.Context, _ *spy) error {
			return live.Do(ctx, "zero", 0, nop)
		}},
		{name: "MaxInt64 token is accepted", call: func(ctx context.Context, _ *spy) error {
			return live.Do(ctx, "max", math.MaxInt64, nop)
		}},

		// fn and tx.
		{name: "nil fn", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Do(ctx, "r", 1, nil)
		}},
		{name: "nil tx", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Check(ctx, nil, "r", 1)
		}},
		{name: "typed nil tx", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return must(fenced.New(sp)).Check(ctx, (*spy)(nil), "r", 1)
		}},

		// Options: New refuses them, before any call.
		{name: "empty table name", want: fenced.ErrInvalid, msg: []string{"empty part"}, call: func(_ context.Context, sp *spy) error {
			return built(fenced.New(sp, fenced.WithTable("")))
		}},
		{name: "empty schema", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return built(fenced.New(sp, fenced.WithTable(".t")))
		}},
		{name: "three-part table name", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return built(fenced.New(sp, fenced.WithTable("a.b.c")))
		}},
		{name: "64-byte table name", want: fenced.ErrInvalid, msg: []string{"64 bytes"}, call: func(_ context.Context, sp *spy) error {
			return built(fenced.New(sp, fenced.WithTable(fmt.Sprintf("%064d", 0))))
		}},
		{name: "1 MB table name", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return built(fenced.New(sp, fenced.WithTable(huge)))
		}},
		{name: "NUL in table name", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return built(fenced.New(sp, fenced.WithTable("a\x00b")))
		}},
		{name: "invalid UTF-8 table name", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return built(fenced.New(sp, fenced.WithTable("s.t\xff")))
		}},
		{name: "nil option is ignored", call: func(ctx context.Context, _ *spy) error {
			return must(fenced.New(pool, nil, fenced.WithTable(fences), nil)).Do(ctx, "nil-option", 1, nop)
		}},
		{name: "typed nil providers mean the globals", call: func(ctx context.Context, _ *spy) error {
			return must(fenced.New(pool, fenced.WithTable(fences),
				fenced.WithTracerProvider((*sdktrace.TracerProvider)(nil)),
				fenced.WithMeterProvider((*sdkmetric.MeterProvider)(nil)))).Do(ctx, "nil-providers", 1, nop)
		}},

		// The server's answers.
		{name: "Do before Migrate", want: fenced.ErrNotMigrated, code: "42P01", msg: []string{"call Guard.Migrate"}, call: func(ctx context.Context, _ *spy) error {
			return unmigrated.Do(ctx, "r", 1, nop)
		}},
		{name: "Check before Migrate", want: fenced.ErrNotMigrated, code: "42P01", call: func(ctx context.Context, _ *spy) error {
			return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return unmigrated.Check(ctx, tx, "r", 1) })
		}},
		{name: "Migrate into a missing schema", code: "3F000", msg: []string{"fenced: migrate"}, call: func(ctx context.Context, _ *spy) error {
			return must(fenced.New(pool, fenced.WithTable(fences+"_no_schema.t"))).Migrate(ctx)
		}},
		{name: "closed pool: Do", msg: []string{"fenced: begin", "closed pool"}, call: func(ctx context.Context, _ *spy) error {
			return must(fenced.New(closedPool, fenced.WithTable(fences))).Do(ctx, "r", 1, nop)
		}},
		{name: "closed pool: Migrate", msg: []string{"fenced: migrate", "closed pool"}, call: func(ctx context.Context, _ *spy) error {
			return must(fenced.New(closedPool, fenced.WithTable(fences))).Migrate(ctx)
		}},
		{name: "closed conn: Do", msg: []string{"fenced: begin", "closed"}, call: func(ctx context.Context, _ *spy) error {
			return must(fenced.New(closedConn, fenced.WithTable(fences))).Do(ctx, "r", 1, nop)
		}},
		{name: "unreachable server: Do", want: syscall.ECONNREFUSED, call: func(ctx context.Context, _ *spy) error {
			return must(fenced.New(refused)).Do(ctx, "r", 1, nop)
		}},
		{name: "unreachable server: Migrate", want: syscall.ECONNREFUSED, call: func(ctx context.Context, _ *spy) error {
			return must(fenced.New(refused)).Migrate(ctx)
		}},
		{name: "silent server: Do ends at the deadline", want: context.DeadlineExceeded, within: time.Second, call: func(ctx context.Context, _ *spy) error {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			return must(fenced.New(silent)).Do(ctx, "r", 1, nop)
		}},
		{name: "silent server: Migrate ends at the deadline", want: context.DeadlineExceeded, within: time.Second, call: func(ctx context.Context, _ *spy) error {
			ctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
			defer cancel()
			return must(fenced.New(silent)).Migrate(ctx)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runBadCase(t, tc) })
	}
}
