package runnertest

import (
	"context"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the host has installed

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/runner"
)

// TestNightlyAtTwoLocal: a 24 h job with WithOffset(2h) and WithLocation
// runs in the slot that began at 02:00 on that zone's clock, not at 00:00
// UTC. The zone is one where 02:00 was 1 to 11 hours ago: the first claim,
// made at once, is within the slot's grace (half the interval), so the run
// comes without waiting for a boundary.
func TestNightlyAtTwoLocal(t *testing.T) {
	var loc *time.Location
	for _, name := range []string{"Pacific/Honolulu", "America/New_York", "America/Sao_Paulo", "Europe/Berlin",
		"Asia/Dubai", "Asia/Kolkata", "Asia/Tokyo", "Australia/Sydney", "Pacific/Auckland"} {
		l, err := time.LoadLocation(name)
		require.NoError(t, err)
		if h := time.Now().In(l).Hour(); h >= 3 && h < 13 {
			loc = l
			break
		}
	}
	require.NotNil(t, loc, "some zone has its clock between 03:00 and 13:00")
	now := time.Now().In(loc)
	want := time.Date(now.Year(), now.Month(), now.Day(), 2, 0, 0, 0, loc)

	_, srv := redistest.Redis(t)
	runs := make(chan runner.Run, 1)
	startReplica(t, srv.Client(), func(r *runner.Runner) {
		require.NoError(t, r.Add("nightly", 24*time.Hour, func(ctx context.Context, run runner.Run) error {
			runs <- run
			return nil
		}, runner.WithOffset(2*time.Hour), runner.WithLocation(loc)))
	})
	var run runner.Run
	select {
	case run = <-runs:
	case <-time.After(10 * time.Second):
		t.Fatal("the job did not run in the current slot")
	}
	assert.True(t, want.Equal(run.Slot), "slot %v, want %v (%s)", run.Slot, want, loc)
	assert.Equal(t, 2, run.Slot.In(loc).Hour())
}
