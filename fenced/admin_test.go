package fenced_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/redfence/redfence/fenced"
)

// fenceRow reads resource's row straight from the fence table.
func fenceRow(t *testing.T, pool *pgxpool.Pool, fences, resource string) (token int64, updated time.Time) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT token, updated_at FROM `+pgx.Identifier{fences}.Sanitize()+` WHERE resource = $1`, resource).Scan(&token, &updated)
	require.NoError(t, err)
	return token, updated
}

// TestRaiseFencesOutOldHolder: after a forced release, Raise with the new
// token refuses the old holder's next write, on a resource already written
// and on one never written.
func TestRaiseFencesOutOldHolder(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	require.NoError(t, g.Do(ctx, "ledger", 5, insert(data, "ledger", 5, "old holder")))

	highest, err := g.Raise(ctx, "ledger", 9)
	require.NoError(t, err)
	assert.Equal(t, int64(9), highest)
	token, _ := fenceRow(t, pool, fences, "ledger")
	assert.Equal(t, int64(9), token, "Raise committed the token")

	called := false
	err = g.Do(ctx, "ledger", 5, func(ctx context.Context, tx pgx.Tx) error {
		called = true
		return insert(data, "ledger", 5, "late")(ctx, tx)
	})
	var stale *fenced.StaleTokenError
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, fenced.StaleTokenError{Resource: "ledger", Token: 5, Highest: 9}, *stale)
	assert.False(t, called, "fn must not run for a token below the raised one")
	require.NoError(t, g.Do(ctx, "ledger", 9, insert(data, "ledger", 9, "new holder")))

	highest, err = g.Raise(ctx, "fresh", 3)
	require.NoError(t, err)
	assert.Equal(t, int64(3), highest)
	err = g.Do(ctx, "fresh", 2, insert(data, "fresh", 2, "late"))
	require.ErrorAs(t, err, &stale)
	assert.Equal(t, int64(3), stale.Highest)

	assert.Equal(t, []string{"old holder", "new holder"}, tags(t, pool, data))
}

// TestRaiseNeverLowers: a lower token is no error and leaves the row as it
// was, token and updated_at; an equal one is accepted, as by Do.
func TestRaiseNeverLowers(t *testing.T) {
	pool, g, fences, data := setup(t)
	ctx := context.Background()
	highest, err := g.Raise(ctx, "r", 9)
	require.NoError(t, err)
	require.Equal(t, int64(9), highest)
	_, before := fenceRow(t, pool, fences, "r")

	highest, err = g.Raise(ctx, "r", 4)
	require.NoError(t, err, "a lower token is not an error for Raise")
	assert.Equal(t, int64(9), highest, "Raise returns the higher token recorded")
	token, after := fenceRow(t, pool, fences, "r")
	assert.Equal(t, int64(9), token, "Raise never lowers")
	assert.Equal(t, before, after, "a lower token changes nothing")

	highest, err = g.Raise(ctx, "r", 9)
	require.NoError(t, err)
	assert.Equal(t, int64(9), highest)

	require.ErrorIs(t, g.Do(ctx, "r", 8, insert(data, "r", 8, "stale")), fenced.ErrStaleToken)
	require.NoError(t, g.Do(ctx, "r", 9, insert(data, "r", 9, "ok")))
	assert.Equal(t, []string{"ok"}, tags(t, pool, data))
}

// TestRaiseTelemetry: Raise has a span of its own, like Do's and Check's,
// a lower token on it is "stale" but not an error, and raises are not
// counted as checks of writes.
func TestRaiseTelemetry(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	_, g, _, _ := setup(t, fenced.WithTracerProvider(tp), fenced.WithMeterProvider(mp))
	ctx := context.Background()

	_, err := g.Raise(ctx, "tel", 9)
	require.NoError(t, err)
	_, err = g.Raise(ctx, "tel", 4)
	require.NoError(t, err)

	spans := rec.Ended()
	require.Len(t, spans, 2)
	want := []map[attribute.Key]attribute.Value{
		{"redfence.resource": attribute.StringValue("tel"), "redfence.token": attribute.Int64Value(9),
			"redfence.outcome": attribute.StringValue("accepted"), "redfence.highest": attribute.Int64Value(9)},
		{"redfence.resource": attribute.StringValue("tel"), "redfence.token": attribute.Int64Value(4),
			"redfence.outcome": attribute.StringValue("stale"), "redfence.highest": attribute.Int64Value(9)},
	}
	for i, s := range spans {
		assert.Equal(t, "redfence.fenced.Raise", s.Name())
		assert.NotEqual(t, codes.Error, s.Status().Code)
		got := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			got[kv.Key] = kv.Value
		}
		assert.Equal(t, want[i], got)
	}

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(ctx, &rm))
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == "redfence.fence.checks" {
				assert.Empty(t, m.Data.(metricdata.Sum[int64]).DataPoints, "a raise is not a check")
			}
		}
	}
}

// TestFences: rows come ordered by resource, limited, with their tokens,
// and the prefix is literal: %, _ and \ are not LIKE's metacharacters.
func TestFences(t *testing.T) {
	_, g, _, _ := setup(t)
	ctx := context.Background()
	start := time.Now()
	// Out of order, so that rows in insertion order are not sorted.
	order := []string{"job/c", "ab", "job/a", "a%x", "jobs", "a_c", "job/b", "abc", "a%", `a\b`, "a!b"}
	raised := map[string]int64{}
	for i, r := range order {
		raised[r] = int64(100 + i)
		_, err := g.Raise(ctx, r, raised[r])
		require.NoError(t, err)
	}
	resources := func(fs []fenced.Fence) []string {
		out := []string{}
		for _, f := range fs {
			out = append(out, f.Resource)
		}
		return out
	}

	all, err := g.Fences(ctx, "", fenced.MaxFences)
	require.NoError(t, err)
	require.Len(t, all, len(raised), "an empty prefix matches every row")
	for _, f := range all {
		assert.Equal(t, raised[f.Resource], f.Token, f.Resource)
		assert.WithinRange(t, f.UpdatedAt, start.Add(-time.Minute), time.Now().Add(time.Minute), f.Resource)
	}

	cases := []struct {
		name   string
		prefix string
		limit  int
		want   []string
	}{
		{"ordered by resource", "job/", 10, []string{"job/a", "job/b", "job/c"}},
		{"limit keeps the first rows", "job/", 2, []string{"job/a", "job/b"}},
		{"limit 1", "job", 1, []string{"job/a"}},
		{"whole resource", "jobs", 10, []string{"jobs"}},
		{"% is literal", "a%", 10, []string{"a%", "a%x"}},
		{"_ is literal", "a_", 10, []string{"a_c"}},
		{`\ is literal`, `a\`, 10, []string{`a\b`}},
		{"no match", "nothing", 10, []string{}},
		{"prefix longer than every resource", strings.Repeat("job/a", 10), 10, []string{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := g.Fences(ctx, tc.prefix, tc.limit)
			require.NoError(t, err)
			assert.Equal(t, tc.want, resources(got))
		})
	}
}

// TestAdminBadInput: Raise and Fences report bad input as Do does, with
// ErrInvalid and no call to the database, and a missing table as
// ErrNotMigrated.
func TestAdminBadInput(t *testing.T) {
	pool, live, fences, _ := setup(t)
	var nilCtx context.Context
	unmigrated := newGuard(t, pool, fenced.WithTable(fences+"_never"))
	raise := func(ctx context.Context, g *fenced.Guard, resource string, token int64) error {
		_, err := g.Raise(ctx, resource, token)
		return err
	}
	list := func(ctx context.Context, g *fenced.Guard, prefix string, limit int) error {
		_, err := g.Fences(ctx, prefix, limit)
		return err
	}
	cancelled := func(ctx context.Context) context.Context {
		ctx, cancel := context.WithCancel(ctx)
		cancel()
		return ctx
	}
	long := strings.Repeat("x", fenced.MaxResourceLen+1)

	cases := []badCase{
		{name: "Raise: nil Guard", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return raise(ctx, nil, "r", 1)
		}},
		{name: "Raise: zero Guard", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return raise(ctx, new(fenced.Guard), "r", 1)
		}},
		{name: "bad table name: New", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return built(fenced.New(sp, fenced.WithTable("a.b.c")))
		}},
		{name: "Raise: nil ctx", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return raise(nilCtx, must(fenced.New(sp)), "r", 1)
		}},
		{name: "Raise: cancelled ctx", want: context.Canceled, call: func(ctx context.Context, sp *spy) error {
			return raise(cancelled(ctx), must(fenced.New(sp)), "r", 1)
		}},
		{name: "Raise: empty resource", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return raise(ctx, must(fenced.New(sp)), "", 1)
		}},
		{name: "Raise: resource over the limit", want: fenced.ErrInvalid, msg: []string{"1025 bytes"}, call: func(ctx context.Context, sp *spy) error {
			return raise(ctx, must(fenced.New(sp)), long, 1)
		}},
		{name: "Raise: NUL in resource", want: fenced.ErrInvalid, msg: []string{"NUL"}, call: func(ctx context.Context, sp *spy) error {
			return raise(ctx, must(fenced.New(sp)), "a\x00b", 1)
		}},
		{name: "Raise: invalid UTF-8 resource", want: fenced.ErrInvalid, msg: []string{"UTF-8"}, call: func(ctx context.Context, sp *spy) error {
			return raise(ctx, must(fenced.New(sp)), "a\xffb", 1)
		}},
		{name: "Raise: negative token", want: fenced.ErrInvalid, msg: []string{"-1"}, call: func(ctx context.Context, sp *spy) error {
			return raise(ctx, must(fenced.New(sp)), "r", -1)
		}},
		{name: "Raise: MaxInt64 token is accepted", call: func(ctx context.Context, _ *spy) error {
			return raise(ctx, live, "max", math.MaxInt64)
		}},
		{name: "Raise before Migrate", want: fenced.ErrNotMigrated, code: "42P01", call: func(ctx context.Context, _ *spy) error {
			return raise(ctx, unmigrated, "r", 1)
		}},

		{name: "Fences: nil Guard", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return list(ctx, nil, "", 1)
		}},
		{name: "Fences: zero Guard", want: fenced.ErrInvalid, call: func(ctx context.Context, _ *spy) error {
			return list(ctx, new(fenced.Guard), "", 1)
		}},
		{name: "Fences: nil ctx", want: fenced.ErrInvalid, call: func(_ context.Context, sp *spy) error {
			return list(nilCtx, must(fenced.New(sp)), "", 1)
		}},
		{name: "Fences: cancelled ctx", want: context.Canceled, call: func(ctx context.Context, sp *spy) error {
			return list(cancelled(ctx), must(fenced.New(sp)), "", 1)
		}},
		{name: "Fences: limit 0", want: fenced.ErrInvalid, msg: []string{"limit 0"}, call: func(ctx context.Context, sp *spy) error {
			return list(ctx, must(fenced.New(sp)), "", 0)
		}},
		{name: "Fences: negative limit", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return list(ctx, must(fenced.New(sp)), "", -1)
		}},
		{name: "Fences: limit over MaxFences", want: fenced.ErrInvalid, msg: []string{"10001"}, call: func(ctx context.Context, sp *spy) error {
			return list(ctx, must(fenced.New(sp)), "", fenced.MaxFences+1)
		}},
		{name: "Fences: prefix over the limit", want: fenced.ErrInvalid, msg: []string{"prefix is 1025 bytes"}, call: func(ctx context.Context, sp *spy) error {
			return list(ctx, must(fenced.New(sp)), long, 1)
		}},
		{name: "Fences: NUL in prefix", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return list(ctx, must(fenced.New(sp)), "\x00", 1)
		}},
		{name: "Fences: invalid UTF-8 prefix", want: fenced.ErrInvalid, call: func(ctx context.Context, sp *spy) error {
			return list(ctx, must(fenced.New(sp)), "\xff", 1)
		}},
		{name: "Fences: limits at the bounds are accepted", call: func(ctx context.Context, _ *spy) error {
			if err := list(ctx, live, "", 1); err != nil {
				return err
			}
			return list(ctx, live, "", fenced.MaxFences)
		}},
		{name: "Fences before Migrate", want: fenced.ErrNotMigrated, code: "42P01", call: func(ctx context.Context, _ *spy) error {
			return list(ctx, unmigrated, "", 1)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { runBadCase(t, tc) })
	}
}
