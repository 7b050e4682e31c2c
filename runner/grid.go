package runner

import (
	"time"
)

// grid is a job's slots: intervals of every, starting offset after
// midnight on loc's wall clock (UTC's when loc is nil), counted from the
// Unix epoch of that clock. Slot n starts when the wall clock first reads
// n×every + offset; with UTC and no offset that is n×every since the epoch.
type grid struct {
	every  int64 // ms
	offset int64 // ms, in [0, every)
	loc    *time.Location
}

const dayMs = 24 * 60 * 60 * 1000

// wall is t's reading on the grid's wall clock, in ms since its epoch.
func (g grid) wall(t time.Time) int64 {
	ms := t.UnixMilli()
	if g.loc == nil {
		return ms
	}
	_, off := t.In(g.loc).Zone()
	return ms + int64(off)*1000
}

// slotOf is the slot t falls in.
func (g grid) slotOf(t time.Time) int64 { return floorDiv(g.wall(t)-g.offset, g.every) }

// start is the first instant the wall clock reads slot's start or later:
// the instant it reads the start, the first of two when DST ends repeats
// it, or the jump when DST starts and skips it.
func (g grid) start(slot int64) time.Time {
	w := slot*g.every + g.offset
	if g.loc == nil {
		return time.UnixMilli(w)
	}
	// The offsets in force a day either side: zones change offset at most
	// once within two days.
	var first time.Time
	for _, probe := range []int64{w - dayMs, w + dayMs} {
		off := offsetAt(time.UnixMilli(probe), g.loc)
		t := time.UnixMilli(w - off)
		if offsetAt(t, g.loc) == off && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	if !first.IsZero() {
		return first
	}
	// In a gap: read with the offset before the jump, w is an instant past
	// it, in the period the jump began.
	from, _ := time.UnixMilli(w - offsetAt(time.UnixMilli(w-dayMs), g.loc)).In(g.loc).ZoneBounds()
	return from
}

func offsetAt(t time.Time, loc *time.Location) int64 {
	_, off := t.In(loc).Zone()
	return int64(off) * 1000
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}
