package runner

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the host has installed

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGridAcrossDST: a daily slot at 02:00 Berlin time, and hourly ones,
// across the days the clock jumps forward (2026-03-29, 02:00 CET to 03:00
// CEST) and back (2026-10-25, 03:00 CEST to 02:00 CET).
func TestGridAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	require.NoError(t, err)
	utc := func(s string) time.Time {
		u, err := time.Parse(time.DateTime, s)
		require.NoError(t, err)
		return u
	}
	daily := grid{every: dayMs, offset: (2 * time.Hour).Milliseconds(), loc: berlin}
	hourly := grid{every: time.Hour.Milliseconds(), loc: berlin}
	for _, tc := range []struct {
		name string
		g    grid
		at   string // an instant in the slot, UTC
		want string // the slot's start, UTC
	}{
		{"daily, winter time", daily, "2026-03-28 12:00:00", "2026-03-28 01:00:00"},
		{"daily, the day DST starts: at the jump", daily, "2026-03-29 12:00:00", "2026-03-29 01:00:00"},
		{"daily, summer time", daily, "2026-03-30 12:00:00", "2026-03-30 00:00:00"},
		{"daily, the day DST ends: the first 02:00", daily, "2026-10-25 12:00:00", "2026-10-25 00:00:00"},
		{"daily, the repeated hour is the same slot", daily, "2026-10-25 01:30:00", "2026-10-25 00:00:00"},
		{"daily, winter again", daily, "2026-10-26 12:00:00", "2026-10-26 01:00:00"},
		{"hourly, before the jump", hourly, "2026-03-29 00:30:00", "2026-03-29 00:00:00"},
		{"hourly, after the jump: 03:00 CEST", hourly, "2026-03-29 01:30:00", "2026-03-29 01:00:00"},
		{"hourly, 02:00 CEST before the repeat", hourly, "2026-10-25 00:30:00", "2026-10-25 00:00:00"},
		{"hourly, the repeated 02:00 CET", hourly, "2026-10-25 01:30:00", "2026-10-25 00:00:00"},
		{"hourly, 03:00 CET", hourly, "2026-10-25 02:30:00", "2026-10-25 02:00:00"},
		{"UTC, no offset: multiples since the epoch", grid{every: dayMs}, "2026-03-29 12:00:00", "2026-03-29 00:00:00"},
		{"UTC, 02:00", grid{every: dayMs, offset: (2 * time.Hour).Milliseconds()}, "2026-03-29 01:00:00", "2026-03-28 02:00:00"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.g.start(tc.g.slotOf(utc(tc.at)))
			assert.Equal(t, utc(tc.want), got.UTC())
			assert.Equal(t, tc.g.slotOf(utc(tc.at)), tc.g.slotOf(got), "a slot's start is in the slot")
		})
	}
	// The hourly slot of 02:00 CET on the day DST starts lies in the
	// skipped hour: it starts at the jump, as 03:00 CEST's does, and the
	// clock never reads it, so the claim skips it.
	jump := utc("2026-03-29 01:00:00")
	s := hourly.slotOf(jump)
	assert.Equal(t, jump, hourly.start(s-1).UTC(), "02:00 starts at the jump")
	assert.Equal(t, jump, hourly.start(s).UTC())
	assert.Equal(t, s-2, hourly.slotOf(jump.Add(-time.Millisecond)), "01:59:59.999 CET is the 01:00 slot")
}
