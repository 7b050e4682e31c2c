package sqlfence_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/testutil"
)

// spy is a database/sql driver that stands in for the database in the
// cases that must not reach it: it counts every connection, transaction
// and statement, and fails each statement.
type spy struct{ calls atomic.Int64 }

var errSpy = errors.New("spy: no database here")

func (s *spy) Connect(context.Context) (driver.Conn, error) { s.calls.Add(1); return spyConn{s}, nil }
func (s *spy) Driver() driver.Driver                        { return nil }

type spyConn struct{ s *spy }

func (c spyConn) Prepare(string) (driver.Stmt, error) { c.s.calls.Add(1); return nil, errSpy }
func (c spyConn) Close() error                        { return nil }
func (c spyConn) Begin() (driver.Tx, error)           { c.s.calls.Add(1); return spyTx{}, nil }

type spyTx struct{}

func (spyTx) Commit() error   { return nil }
func (spyTx) Rollback() error { return nil }

// spyDB is a database whose every call sp counts, and a transaction begun
// on it before the count is reset, for the Check cases.
func spyDB(t *testing.T, sp *spy) (*sql.DB, *sql.Tx) {
	t.Helper()
	db := sql.OpenDB(sp)
	t.Cleanup(func() { _ = db.Close() })
	tx, err := db.Begin()
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback() })
	sp.calls.Store(0)
	return db, tx
}

// badCase is one input and the error it must produce. With want and msg
// both empty the call must succeed.
type badCase struct {
	name string
	// call makes the call under test with db and tx, a spy's, which the
	// harness asserts saw no call.
	call func(ctx context.Context, db *sql.DB, tx *sql.Tx) error
	want error    // errors.Is target
	msg  []string // substrings of the message
}

const caseBound = 5 * time.Second

func runBadCase(t *testing.T, tc badCase) {
	t.Helper()
	sp := &spy{}
	db, tx := spyDB(t, sp)
	ctx, cancel := context.WithTimeout(context.Background(), caseBound)
	defer cancel()
	err := testutil.Safely(t, caseBound+2*time.Second, func() error { return tc.call(ctx, db, tx) })
	assert.Zero(t, sp.calls.Load(), "the database was called")
	if tc.want == nil && len(tc.msg) == 0 {
		require.NoError(t, err)
		return
	}
	require.Error(t, err)
	assert.LessOrEqual(t, len(err.Error()), 512, "message too long: %.200s...", err.Error())
	if tc.want != nil {
		assert.ErrorIs(t, err, tc.want)
	}
	for _, s := range []error{sqlfence.ErrInvalid, sqlfence.ErrStaleToken, sqlfence.ErrNotMigrated} {
		if s != tc.want {
			assert.NotErrorIs(t, err, s)
		}
	}
	for _, s := range tc.msg {
		assert.Contains(t, err.Error(), s)
	}
}

// built is New's error for the cases New must refuse; a Guard returned
// beside it is an error that matches no sentinel.
func built(g *sqlfence.Guard, err error) error {
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

// TestBadInput: every exported function and option, given bad input,
// returns an error matching ErrInvalid (or the ctx's error) before any call
// to the database, and never panics.
func TestBadInput(t *testing.T) {
	nop := func(context.Context, *sql.Tx) error { return nil }
	var nilCtx context.Context // a nil ctx, spelt so that linters let it through
	long := strings.Repeat("é", sqlfence.MaxResourceLen/2)
	huge := strings.Repeat("x", 1<<20)
	cancelled := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx
	}
	cases := []badCase{
		{name: "nil db", want: sqlfence.ErrInvalid, msg: []string{"nil database"}, call: func(ctx context.Context, _ *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(nil, sqlfence.MySQL))
		}},
		{name: "typed nil *sql.DB", want: sqlfence.ErrInvalid, msg: []string{"*sql.DB"}, call: func(ctx context.Context, _ *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New((*sql.DB)(nil), sqlfence.SQLite))
		}},
		{name: "typed nil *sql.Conn", want: sqlfence.ErrInvalid, call: func(ctx context.Context, _ *sql.DB, tx *sql.Tx) error {
			return built(sqlfence.New((*sql.Conn)(nil), sqlfence.Postgres))
		}},
		{name: "zero dialect", want: sqlfence.ErrInvalid, msg: []string{"unknown dialect Dialect(0)"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(db, 0))
		}},
		{name: "unknown dialect", want: sqlfence.ErrInvalid, msg: []string{"Dialect(42)"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(db, 42))
		}},
		{name: "nil Guard: Do", want: sqlfence.ErrInvalid, call: func(ctx context.Context, _ *sql.DB, _ *sql.Tx) error {
			return (*sqlfence.Guard)(nil).Do(ctx, "r", 1, nop)
		}},
		{name: "nil Guard: Migrate", want: sqlfence.ErrInvalid, call: func(ctx context.Context, _ *sql.DB, _ *sql.Tx) error {
			return (*sqlfence.Guard)(nil).Migrate(ctx)
		}},
		{name: "nil Guard: Check", want: sqlfence.ErrInvalid, call: func(ctx context.Context, _ *sql.DB, tx *sql.Tx) error {
			return (*sqlfence.Guard)(nil).Check(ctx, tx, "r", 1)
		}},
		{name: "zero Guard: Do", want: sqlfence.ErrInvalid, msg: []string{"zero Guard"}, call: func(ctx context.Context, _ *sql.DB, _ *sql.Tx) error {
			return new(sqlfence.Guard).Do(ctx, "r", 1, nop)
		}},
		{name: "zero Guard: Check", want: sqlfence.ErrInvalid, call: func(ctx context.Context, _ *sql.DB, tx *sql.Tx) error {
			return new(sqlfence.Guard).Check(ctx, tx, "r", 1)
		}},
		{name: "nil ctx: Do", want: sqlfence.ErrInvalid, call: func(_ context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Do(nilCtx, "r", 1, nop)
		}},
		{name: "nil ctx: Migrate", want: sqlfence.ErrInvalid, call: func(_ context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Migrate(nilCtx)
		}},
		{name: "nil ctx: Check", want: sqlfence.ErrInvalid, call: func(_ context.Context, db *sql.DB, tx *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Check(nilCtx, tx, "r", 1)
		}},
		{name: "cancelled ctx: Do", want: context.Canceled, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.SQLite)).Do(cancelled(ctx), "r", 1, nop)
		}},
		{name: "expired ctx: Migrate", want: context.DeadlineExceeded, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			ctx, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
			defer cancel()
			return must(sqlfence.New(db, sqlfence.Postgres)).Migrate(ctx)
		}},
		{name: "cancelled ctx: Check", want: context.Canceled, call: func(ctx context.Context, db *sql.DB, tx *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Check(cancelled(ctx), tx, "r", 1)
		}},
		{name: "empty resource: Do", want: sqlfence.ErrInvalid, msg: []string{"empty resource"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Do(ctx, "", 1, nop)
		}},
		{name: "empty resource: Check", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, tx *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.SQLite)).Check(ctx, tx, "", 1)
		}},
		{name: "resource one byte over the limit", want: sqlfence.ErrInvalid, msg: []string{"1025 bytes", "limit of 1024"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Do(ctx, long+"x", 1, nop)
		}},
		{name: "1 MB resource: Check", want: sqlfence.ErrInvalid, msg: []string{"1048576 bytes"}, call: func(ctx context.Context, db *sql.DB, tx *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.Postgres)).Check(ctx, tx, huge, 1)
		}},
		{name: "NUL in resource", want: sqlfence.ErrInvalid, msg: []string{"NUL"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.SQLite)).Do(ctx, "a\x00b", 1, nop)
		}},
		{name: "invalid UTF-8 resource", want: sqlfence.ErrInvalid, msg: []string{"UTF-8"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Do(ctx, "a\xffb", 1, nop)
		}},
		{name: "negative token: Do", want: sqlfence.ErrInvalid, msg: []string{"-1"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Do(ctx, "r", -1, nop)
		}},
		{name: "MinInt64 token: Check", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, tx *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.Postgres)).Check(ctx, tx, "r", math.MinInt64)
		}},
		{name: "nil fn", want: sqlfence.ErrInvalid, msg: []string{"nil fn"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.SQLite)).Do(ctx, "r", 1, nil)
		}},
		{name: "nil tx", want: sqlfence.ErrInvalid, msg: []string{"nil transaction"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return must(sqlfence.New(db, sqlfence.MySQL)).Check(ctx, nil, "r", 1)
		}},
		{name: "empty table name", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(db, sqlfence.MySQL, sqlfence.WithTable("")))
		}},
		{name: "empty schema", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(db, sqlfence.SQLite, sqlfence.WithTable(".t")))
		}},
		{name: "three-part table name", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, tx *sql.Tx) error {
			return built(sqlfence.New(db, sqlfence.Postgres, sqlfence.WithTable("a.b.c")))
		}},
		{name: "64-byte table name", want: sqlfence.ErrInvalid, msg: []string{"64 bytes"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(db, sqlfence.MySQL, sqlfence.WithTable(fmt.Sprintf("%064d", 0))))
		}},
		{name: "1 MB table name", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(db, sqlfence.MySQL, sqlfence.WithTable(huge)))
		}},
		{name: "NUL in table name", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(db, sqlfence.SQLite, sqlfence.WithTable("a\x00b")))
		}},
		{name: "invalid UTF-8 table name", want: sqlfence.ErrInvalid, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			return built(sqlfence.New(db, sqlfence.Postgres, sqlfence.WithTable("s.t\xff")))
		}},
		{name: "nil options and typed nil providers are not bad input", want: sqlfence.ErrInvalid, msg: []string{"negative token"}, call: func(ctx context.Context, db *sql.DB, _ *sql.Tx) error {
			g := must(sqlfence.New(db, sqlfence.MySQL, nil,
				sqlfence.WithTracerProvider((*sdktrace.TracerProvider)(nil)),
				sqlfence.WithMeterProvider((*sdkmetric.MeterProvider)(nil)), nil))
			return g.Do(ctx, "r", -1, nop)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runBadCase(t, tc) })
	}
}

// TestServerAnswers: what each database says about a missing fence table
// or schema, and the limits of the accepted range, per dialect.
func TestServerAnswers(t *testing.T) {
	eachStore(t, func(t *testing.T, s store) {
		e := setup(t, s)
		ctx := context.Background()
		nop := func(context.Context, *sql.Tx) error { return nil }

		unmigrated := newGuard(t, e.db, s.dialect, sqlfence.WithTable(e.fences+"_never"))
		err := unmigrated.Do(ctx, "r", 1, nop)
		require.ErrorIs(t, err, sqlfence.ErrNotMigrated)
		assert.Contains(t, err.Error(), "call Guard.Migrate")
		assert.NotErrorIs(t, err, sqlfence.ErrInvalid)
		tx, err := e.db.BeginTx(ctx, nil)
		require.NoError(t, err)
		require.ErrorIs(t, unmigrated.Check(ctx, tx, "r", 1), sqlfence.ErrNotMigrated)
		require.NoError(t, tx.Rollback())

		err = newGuard(t, e.db, s.dialect, sqlfence.WithTable("no_such_schema.t")).Migrate(ctx)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "sqlfence: migrate")
		assert.NotErrorIs(t, err, sqlfence.ErrInvalid)

		// The longest resource fits each dialect's key; so do 0 and MaxInt64.
		long := strings.Repeat("é", sqlfence.MaxResourceLen/2)
		require.NoError(t, e.g.Do(ctx, long, 1, nop))
		require.ErrorIs(t, e.g.Do(ctx, long, 0, nop), sqlfence.ErrStaleToken)
		require.NoError(t, e.g.Do(ctx, "zero", 0, nop))
		require.NoError(t, e.g.Do(ctx, "max", math.MaxInt64, nop))
		var stale *sqlfence.StaleTokenError
		require.ErrorAs(t, e.g.Do(ctx, "max", math.MaxInt64-1, nop), &stale)
		assert.Equal(t, int64(math.MaxInt64), stale.Highest)
		// Resources differing in a byte, or in case, are distinct.
		require.NoError(t, e.g.Do(ctx, "Case", 5, nop))
		require.NoError(t, e.g.Do(ctx, "case", 1, nop))
		require.NoError(t, e.g.Do(ctx, "cas\u00e9", 1, nop))
		require.NoError(t, e.g.Do(ctx, "case ", 1, nop))
	})
}
