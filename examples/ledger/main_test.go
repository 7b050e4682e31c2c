package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
)

func TestMain(m *testing.M) { redistest.Main(m) }

func short(fencing bool) options {
	return options{fencing: fencing, workers: 3, accounts: 4, transfers: 10, stalls: 1, ttl: 150 * time.Millisecond}
}

// realServers points o at the package's PostgreSQL and a private redis-server.
func realServers(t *testing.T, o options) options {
	_, srv := redistest.Redis(t)
	o.dbURL, o.redisURL = testutil.PostgresURL(t), "redis://"+srv.Addr()
	return o
}

// runDemo runs the demo and checks that the numbers it printed are the ones
// it measured.
func runDemo(t *testing.T, o options) result {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := run(ctx, &out, o)
	require.NoError(t, err)
	t.Log("\n" + out.String())
	assert.Positive(t, res.perSecond)
	assert.Contains(t, out.String(), fmt.Sprintf("throughput (%s): %.0f transfers/s", lockMode(o.global), res.perSecond))
	assert.Contains(t, out.String(), fmt.Sprintf("transfers committed:          %d\n", res.committed))
	assert.Contains(t, out.String(), fmt.Sprintf("stale writes rejected (fence): %d\n", res.staleRejected))
	assert.Contains(t, out.String(), fmt.Sprintf("stale writes accepted:        %d\n", res.staleAccepted))
	assert.Contains(t, out.String(), fmt.Sprintf("total balance: %d before, %d after: ", res.totalBefore, res.totalAfter))
	return res
}

// TestFencingHolds: the stalled worker's write is rejected and no money is
// created or destroyed. Real PostgreSQL and redis-server via the URLs.
func TestFencingHolds(t *testing.T) {
	o := realServers(t, short(true))
	res := runDemo(t, o)
	assert.Equal(t, res.totalBefore, res.totalAfter, "the invariant holds")
	assert.GreaterOrEqual(t, res.staleRejected, int64(1))
	assert.Zero(t, res.staleAccepted)
	assert.Equal(t, int64(o.workers*o.transfers)-res.staleRejected, res.committed)
}

// TestGlobalLock: the old single lock, "ledger", fenced as one resource,
// keeps the invariant and rejects the stalled write too.
func TestGlobalLock(t *testing.T) {
	o := short(true)
	o.global = true
	o = realServers(t, o)
	res := runDemo(t, o)
	assert.Equal(t, res.totalBefore, res.totalAfter, "the invariant holds")
	assert.GreaterOrEqual(t, res.staleRejected, int64(1))
	assert.Zero(t, res.staleAccepted)
}

// TestPerAccountLocksKeepTheInvariant: many workers over few accounts, so
// that transfers share accounts all the time; each takes both of its
// accounts, or updates are lost and the total moves.
func TestPerAccountLocksKeepTheInvariant(t *testing.T) {
	o := short(true)
	o.workers, o.accounts, o.transfers = 6, 3, 30
	o = realServers(t, o)
	res := runDemo(t, o)
	assert.Equal(t, res.totalBefore, res.totalAfter, "the invariant holds")
	assert.Zero(t, res.staleAccepted)
}

// TestWithoutFencingCorrupts: the same run without the fence shows the lost
// update the fence prevents.
func TestWithoutFencingCorrupts(t *testing.T) {
	o := realServers(t, short(false))
	res := runDemo(t, o)
	assert.NotEqual(t, res.totalBefore, res.totalAfter, "the stale write must break the invariant")
	assert.GreaterOrEqual(t, res.staleAccepted, int64(1))
}

// TestDefaults runs the demo as a newcomer does: no DATABASE_URL (a
// throwaway cluster), no REDIS_URL (embedded Redis).
func TestDefaults(t *testing.T) {
	res := runDemo(t, short(true))
	assert.Equal(t, res.totalBefore, res.totalAfter)
	assert.GreaterOrEqual(t, res.staleRejected, int64(1))
}

// TestUnreachable: a DATABASE_URL or REDIS_URL nobody answers at ends the
// demo within seconds with an error that names the server and its address,
// before anything is printed.
func TestUnreachable(t *testing.T) {
	silent := testutil.SilentServer(t)
	for _, tc := range []struct {
		name string
		o    func(options) options
		want string
	}{
		{"database refused", func(o options) options { o.dbURL = "postgres://127.0.0.1:1/x"; return o },
			"cannot reach PostgreSQL at 127.0.0.1:1: "},
		{"database silent", func(o options) options { o.dbURL = "postgres://" + silent + "/x"; return o },
			"cannot reach PostgreSQL at " + silent + ": "},
		{"redis refused", func(o options) options { o.redisURL = "redis://127.0.0.1:1"; return o },
			"cannot reach Redis at 127.0.0.1:1: "},
		{"redis silent", func(o options) options { o.redisURL = "redis://" + silent; return o },
			"cannot reach Redis at " + silent + ": "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			late := testutil.MeasureLateness(t)
			start := time.Now()
			_, err := run(ctx, &out, tc.o(short(true)))
			require.Error(t, err)
			assert.Less(t, time.Since(start), late.Bound(10*time.Second))
			assert.Contains(t, err.Error(), tc.want)
			assert.Regexp(t, `unset (DATABASE|REDIS)_URL`, err.Error())
			assert.Empty(t, out.String())
		})
	}
}

// TestConclude: the verdict follows the measured totals, and the advice to
// turn fencing on is given only when it was off.
func TestConclude(t *testing.T) {
	for _, tc := range []struct {
		name    string
		fencing bool
		res     result
		want    []string
		wantNot []string
	}{
		{"holds", true, result{perSecond: 123.4, committed: 29, staleRejected: 1, totalBefore: 4000, totalAfter: 4000},
			[]string{"throughput (per account): 123 transfers/s", "compare with -global", "transfers committed:          29\n", "stale writes rejected (fence): 1\n", "4000 before, 4000 after: the invariant holds."},
			[]string{"VIOLATED"}},
		{"violated without fencing", false, result{committed: 30, staleAccepted: 1, totalBefore: 4000, totalAfter: 4037},
			[]string{"stale writes accepted:        1\n", "VIOLATED: +37 created or destroyed by stale writes.", "run with -fencing=true"},
			[]string{"holds"}},
		{"violated with fencing", true, result{committed: 30, staleAccepted: 1, totalBefore: 4000, totalAfter: 3990},
			[]string{"VIOLATED: -10 created or destroyed although fencing was on."},
			[]string{"holds", "run with -fencing=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			o := short(tc.fencing)
			conclude(&out, o, tc.res)
			for _, s := range tc.want {
				assert.Contains(t, out.String(), s)
			}
			for _, s := range tc.wantNot {
				assert.NotContains(t, out.String(), s)
			}
		})
	}
}

// TestClaimsFenceEveryAccount: a transfer's fence claims each account it
// locked, with that account's own token, or a stalled worker whose other
// account moved on would slip through.
func TestClaimsFenceEveryAccount(t *testing.T) {
	c, _ := redistest.Redis(t)
	l, err := newLocker(c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	d := &ledgerRun{}
	ctx := context.Background()
	ls, err := l.LockAll(ctx, d.keys(7, 3))
	require.NoError(t, err)
	defer ls.Release(ctx)
	assert.ElementsMatch(t, []fenced.Claim{
		{Resource: "account:3", Token: ls.TokenOf("account:3")},
		{Resource: "account:7", Token: ls.TokenOf("account:7")},
	}, claims(ls))
	assert.NotEqual(t, ls.TokenOf("account:3"), ls.TokenOf("account:7"))
}

// TestLocksInPostgres: -postgres, no Redis. Six workers over three
// accounts read and then write both balances; only the locks taken in the
// transfer's transaction (QueueLockTx) keep the total. The stalled worker
// keeps its rows while it sleeps, so every transfer commits and none is
// stale.
func TestLocksInPostgres(t *testing.T) {
	o := short(true)
	o.workers, o.accounts, o.transfers, o.postgres = 6, 3, 30, true
	o.dbURL = testutil.PostgresURL(t)
	res := runDemo(t, o)
	assert.Equal(t, res.totalBefore, res.totalAfter, "the invariant holds")
	assert.Equal(t, int64(o.workers*o.transfers), res.committed)
	assert.Zero(t, res.staleRejected+res.staleAccepted)

	o.fencing = false
	_, err := run(t.Context(), io.Discard, o)
	assert.ErrorContains(t, err, "no fence to turn off")
}
