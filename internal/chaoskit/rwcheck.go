package chaoskit

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/stretchr/testify/assert"
)

// Check judges the read-write run: the writes' history linearizable, the
// write tokens the resource accepted strictly increasing (one write per
// write hold), the register counting exactly the accepted writes; every
// live read seeing the live writes its token vouches for; no read hold
// overlapping a write hold (nor two write holds) beyond the drift margin.
// The last two are excused across a fault that lost the holds in the
// store. It logs the run's figures in one line.
func (w *RWWorld) Check(name string) {
	t := w.t
	t.Helper()
	backwards, v := w.registerChecked(name)

	rw := &w.rw
	rw.mu.Lock()
	defer rw.mu.Unlock()
	drift := w.Lockers[0].ClockDrift(w.cfg.TTL) // the clients' Lockers share their options
	var badReads, badOverlaps []string
	stale := staleReads(rw.writes, rw.reads)
	for _, s := range stale {
		if ok, near := explained(rw.lossy, s.Missed.Call, s.Read.At); !ok {
			badReads = append(badReads, fmt.Sprintf("%v; lossy faults near it: %v", s, near))
		}
	}
	overlaps := rwOverlaps(rw.spans, drift)
	for _, o := range overlaps {
		if ok, near := explained(rw.lossy, o.A.Call, o.B.Start); !ok {
			badOverlaps = append(badOverlaps, fmt.Sprintf("%v; lossy faults near it: %v", o, near))
		}
	}
	liveReads := 0
	for _, r := range rw.reads {
		if r.Live {
			liveReads++
		}
	}
	t.Logf("%s: %d writes, %d reads (%d live), %d downgrades, register %d, faults {%s}, stalls performed %d, stale writes rejected %d, tries refused %d, lock timeouts/errors %d, accepted tokens out of order %d, stale reads %d (%d unexplained by a restart that lost the holds), overlaps %d (%d unexplained)",
		name, len(w.history), len(rw.reads), liveReads, rw.downgrades.Load(), v, w.faultCounts(), w.stalled.Load(), w.stale.Load(),
		rw.tries.Load(), w.lockErrs.Load(), backwards, len(stale), len(badReads), len(overlaps), len(badOverlaps))
	for _, b := range badReads[:min(len(badReads), 3)] {
		t.Errorf("%s: stale read: %s", name, b)
	}
	for _, b := range badOverlaps[:min(len(badOverlaps), 3)] {
		t.Errorf("%s: read and write held at once: %s", name, b)
	}
	assert.Zero(t, len(badReads), "live reads older than the write their token vouches for (the first shown)")
	assert.Zero(t, len(badOverlaps), "holds the lock did not keep apart (the first shown)")
	assert.Zero(t, backwards, "the resource accepted a write token that was not larger")
	assert.Equal(t, int64(len(w.history)), v, "every accepted write, and only those, changed the register")
	assert.NotEmpty(t, w.history, "no write succeeded")
	assert.Positive(t, liveReads, "no live read")
	w.stallsShowed()
}

// staleRead is a live read that missed a live write its token vouches for.
type staleRead struct {
	Read   rwRead
	Missed rwWrite
}

func (s staleRead) String() string {
	return fmt.Sprintf("client %d read %d at %s with token %d (hold asked for at %s), missing the write with token %d that left %d",
		s.Read.Who, s.Read.Seen, clock(s.Read.At), s.Read.Token, clock(s.Read.Call), s.Missed.Token, s.Missed.After)
}

// staleReads returns the live reads older than a live write at or below
// their token. Sound because a read's token is the last write granted
// before its grant: every write hold with a token at or below it ended
// (released, downgraded, or its lease ran out on the server, the local
// deadline keeping the drift margin inside it) before the read was
// granted, and a live write committed before its hold ended. A write that
// committed after its hold's deadline (a stall) is outside the lock's
// promise: only the fence judges it.
func staleReads(writes []rwWrite, reads []rwRead) []staleRead {
	var vouched []rwWrite
	for _, wr := range writes {
		if wr.Live {
			vouched = append(vouched, wr)
		}
	}
	slices.SortFunc(vouched, func(a, b rwWrite) int { return cmp.Compare(a.Token, b.Token) })
	// newest[i]: the write leaving the most among vouched[:i+1].
	newest := make([]rwWrite, len(vouched))
	for i, wr := range vouched {
		newest[i] = wr
		if i > 0 && newest[i-1].After > wr.After {
			newest[i] = newest[i-1]
		}
	}
	var out []staleRead
	for _, r := range reads {
		n, _ := slices.BinarySearchFunc(vouched, r.Token+1, func(a rwWrite, tok int64) int { return cmp.Compare(a.Token, tok) })
		if !r.Live || n == 0 {
			continue
		}
		if m := newest[n-1]; r.Seen < m.After {
			out = append(out, staleRead{Read: r, Missed: m})
		}
	}
	return out
}

// rwOverlap is a read and a write belief, or two writes, held at once for
// By, beyond the margin.
type rwOverlap struct {
	A, B rwSpan
	By   time.Duration
}

func (o rwOverlap) String() string {
	kind := func(s rwSpan) string {
		if s.Write {
			return "write"
		}
		return "read"
	}
	return fmt.Sprintf("client %d's %s (token %d, %s..%s) and client %d's %s (token %d, %s..%s) held at once for %v",
		o.A.Who, kind(o.A), o.A.Token, clock(o.A.Start), clock(o.A.End), o.B.Who, kind(o.B), o.B.Token, clock(o.B.Start), clock(o.B.End), o.By)
}

// rwOverlaps returns the pairs of beliefs, one of them a write, that held
// at once: the later one began before the earlier one ended, by more than
// margin (the Locker's drift margin, which each local deadline keeps to
// the server's expiry) when the earlier ended at its deadline or its loss,
// by any amount when its client let it go (Stopped: the release reached
// the server after). Sound because a write is granted only when no hold is
// live on the server, a read only when no write is, and a belief ends no
// later than its hold on the server.
func rwOverlaps(spans []rwSpan, margin time.Duration) []rwOverlap {
	spans = slices.Clone(spans)
	slices.SortFunc(spans, func(a, b rwSpan) int { return a.Start.Compare(b.Start) })
	var out []rwOverlap
	for i, a := range spans {
		for _, b := range spans[i+1:] {
			if !b.Start.Before(a.End) {
				break // sorted by start: the later ones begin later still
			}
			if !a.Write && !b.Write || !b.End.After(b.Start) {
				continue
			}
			end := a.End
			if b.End.Before(end) {
				end = b.End
			}
			allowed := margin
			if a.Stopped {
				allowed = 0
			}
			if by := end.Sub(b.Start); by > allowed {
				out = append(out, rwOverlap{A: a, B: b, By: by})
			}
		}
	}
	return out
}

// explained reports whether a lossy fault was being applied or healed
// between from and to; when not, it returns those within 2 s of them for
// the message.
func explained(lossy []window, from, to time.Time) (bool, []window) {
	var near []window
	for _, w := range lossy {
		if !w.to.Before(from) && !w.from.After(to) {
			return true, nil
		}
		if w.to.After(from.Add(-2*time.Second)) && w.from.Before(to.Add(2*time.Second)) {
			near = append(near, w)
		}
	}
	return false, near
}

func clock(t time.Time) string { return t.Format("15:04:05.000000") }
