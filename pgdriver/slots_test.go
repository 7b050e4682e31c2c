package pgdriver_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/pgdriver"
	"github.com/redfence/redfence/runner"
)

// TestClaimSlotRules: a slot is claimed once; the claimer's retry finds its
// claim; a lower or equal slot is refused while a claim is kept, any slot
// once it is not; a gap refuses even a higher slot until it has passed.
// Expiry is the database's clock, moved here by rewriting the row.
func TestClaimSlotRules(t *testing.T) {
	pool, schema := setup(t)
	ctx := t.Context()
	d, err := pgdriver.New(pool, pgdriver.WithSchema(schema))
	require.NoError(t, err)
	claim := func(slot int64, claimer string, gap time.Duration) bool {
		t.Helper()
		ok, err := d.ClaimSlot(ctx, backend.SlotClaim{Key: "job", Slot: slot, Claimer: claimer, TTL: time.Hour, Gap: gap})
		require.NoError(t, err)
		return ok
	}
	slots := pgx.Identifier{schema, pgdriver.SlotsTable}.Sanitize()
	age := func(column string) {
		t.Helper()
		_, err := pool.Exec(ctx, `UPDATE `+slots+` SET `+column+` = clock_timestamp() - interval '1 second'`)
		require.NoError(t, err)
	}
	assert.True(t, claim(5, "a", 0), "a free slot")
	assert.True(t, claim(5, "a", 0), "the claimer's retry")
	assert.False(t, claim(5, "b", 0), "another claimer, the same slot")
	assert.False(t, claim(4, "b", 0), "a lower slot")
	assert.True(t, claim(6, "b", time.Hour), "a higher slot")
	assert.False(t, claim(7, "a", 0), "a higher slot within the gap")
	assert.True(t, claim(6, "b", 0), "the retry within its own gap")
	age("gap_until")
	assert.True(t, claim(7, "a", 0), "the gap passed")
	assert.False(t, claim(3, "b", 0), "a lower slot while the claim is kept")
	age("kept_until")
	assert.True(t, claim(3, "b", 0), "any slot once the claim is forgotten")

	_, found, err := d.GetRecord(ctx, "last")
	require.NoError(t, err)
	assert.False(t, found)
	require.NoError(t, d.PutRecord(ctx, "last", []byte("run 1"), time.Hour))
	require.NoError(t, d.PutRecord(ctx, "last", []byte("run 2"), time.Hour))
	v, found, err := d.GetRecord(ctx, "last")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "run 2", string(v))
	_, err = pool.Exec(ctx, `UPDATE `+pgx.Identifier{schema, pgdriver.RecordsTable}.Sanitize()+` SET expires_at = clock_timestamp() - interval '1 second'`)
	require.NoError(t, err)
	_, found, err = d.GetRecord(ctx, "last")
	require.NoError(t, err)
	assert.False(t, found, "an expired record")

	before := time.Now()
	now, err := d.ServerTime(ctx)
	require.NoError(t, err)
	assert.WithinDuration(t, before, now, time.Minute, "the database's clock (same host)")

	for _, c := range []backend.SlotClaim{{Slot: 1, Claimer: "a", TTL: time.Hour}, {Key: "k", Slot: 1, TTL: time.Hour}, {Key: "k", Claimer: "a"}} {
		_, err := d.ClaimSlot(ctx, c)
		assert.ErrorIs(t, err, pgdriver.ErrInvalid, "%+v", c)
	}
}

// TestRunnerOnPostgres: three replicas whose clocks differ by an hour
// run a job over pgdriver Lockers. The runner counts slots on the
// database's clock (ServerClock): every slot is a time of the database's,
// each runs once, tokens increase run after run, no two runs overlap, and
// about every slot runs.
func TestRunnerOnPostgres(t *testing.T) {
	_, schema := setup(t)
	const every = 100 * time.Millisecond
	var (
		mu       sync.Mutex
		runs     []runner.Run
		inFlight atomic.Int64
		overlaps atomic.Int64
	)
	ran := make(chan struct{}, 10_000)
	job := func(ctx context.Context, run runner.Run) error {
		if inFlight.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer inFlight.Add(-1)
		mu.Lock()
		runs = append(runs, run)
		mu.Unlock()
		ran <- struct{}{}
		return nil
	}
	late := testutil.MeasureLateness(t)
	start := time.Now()
	var stops []func() error
	for i, skew := range []time.Duration{-time.Hour, 0, time.Hour} {
		l, _, _ := locker(t, schema, fmt.Sprint("runner-", i))
		r, err := runner.New(l, runner.WithReplicaID(fmt.Sprint("r", i)),
			runner.WithClock(func() time.Time { return time.Now().Add(skew) }))
		require.NoError(t, err)
		require.NoError(t, r.Add("report", every, job))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		stop := sync.OnceValue(func() error { cancel(); return <-done })
		t.Cleanup(func() { _ = stop() })
		stops = append(stops, stop)
	}
	timeout := time.NewTimer(time.Minute)
	defer timeout.Stop()
	for i := range 20 {
		select {
		case <-ran:
		case <-timeout.C:
			t.Fatalf("%d runs of 20 within a minute", i)
		}
	}
	for _, stop := range stops {
		require.NoError(t, stop())
	}
	window := time.Since(start)
	late.Stop()

	mu.Lock()
	defer mu.Unlock()
	seen := map[time.Time]int{}
	for i, r := range runs {
		seen[r.Slot]++
		assert.WithinDuration(t, start, r.Slot, time.Minute, "slot %v is not on the database's clock", r.Slot)
		if i > 0 {
			assert.Greater(t, r.Token, runs[i-1].Token, "tokens increase run after run")
		}
	}
	for slot, n := range seen {
		assert.Equal(t, 1, n, "slot %v ran %d times", slot, n)
	}
	assert.Zero(t, overlaps.Load(), "two runs overlapped")
	// The slots from the first run's to the last's, on the database's
	// clock: the replicas' start-up, however slow, is outside them.
	require.NotEmpty(t, runs)
	span := int(runs[len(runs)-1].Slot.Sub(runs[0].Slot)/every) + 1
	lost := int(late.Bound(0) / every)
	t.Logf("%d runs over %d slots in %v, timers up to %v late", len(runs), span, window, late.Worst())
	assert.LessOrEqual(t, len(runs), int(window/every)+2, "more runs than slots: the replicas' clocks were used")
	assert.GreaterOrEqual(t, len(runs), span-2-lost, "slots without a run")
}
