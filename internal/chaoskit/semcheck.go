package chaoskit

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/leadercheck"
)

// semState is the model's state: the tokens of the permits held, ascending
// then zeros (a canonical form, so that == compares states), the last
// token granted, and how many lossy windows are open.
type semState struct {
	held  [8]int64
	last  int64
	lossy int
}

// semModel is a counting semaphore of limit permits (at most 8; Clients
// hold at most Clients): an acquire is legal only while fewer than limit
// are held and with a token above every one granted before it (tokens
// rise across lost holders too: they are the store's clock when its
// counter is lost); an end takes its permit out, if held. Within a lossy
// window the limit is not enforced (a failover's old primary may grant
// beside the new one) and at its close every holder is taken out (the
// store may have lost any of them); the token order holds throughout.
func semModel(limit int) porcupine.Model {
	return porcupine.Model{
		Init: func() any { return semState{} },
		Step: func(state, _, output any) (bool, any) {
			s := state.(semState)
			switch op := output.(type) {
			case semAcquired:
				n := slices.Index(s.held[:], 0)
				if op.token <= s.last || n < 0 || n >= limit && s.lossy == 0 {
					return false, s
				}
				s.held[n], s.last = op.token, op.token
				slices.Sort(s.held[:n+1])
			case semEnded:
				if i := slices.Index(s.held[:], op.token); i >= 0 {
					copy(s.held[i:], s.held[i+1:])
					s.held[len(s.held)-1] = 0
				}
			case semLossy:
				if op.open {
					s.lossy++
				} else {
					s.lossy--
					s.held = [8]int64{}
				}
			}
			return true, s
		},
		DescribeOperation: func(_, output any) string {
			switch op := output.(type) {
			case semAcquired:
				return fmt.Sprintf("acquire %d", op.token)
			case semEnded:
				return fmt.Sprintf("end %d", op.token)
			}
			if output.(semLossy).open {
				return "lossy fault begins"
			}
			return "lossy fault ends: holders lost"
		},
		DescribeState: func(state any) string {
			s := state.(semState)
			return fmt.Sprintf("held %v, last %d, lossy windows open %d", s.held[:slices.Index(append(s.held[:], 0), 0)], s.last, s.lossy)
		},
	}
}

// checkSemaphore is Check for the semaphore workload: the permits'
// history linearizable against semModel; no acquisition made while
// Permits others believed they held a permit (past the drift margin),
// unless one of those lost it in the store; every committed write decided
// while its permit was believed held; the table holding exactly the
// committed writes, each client's in token order.
func (w *World) checkSemaphore(name string) {
	t := w.t
	t.Helper()
	sw := w.sem
	w.linearizable(name, semModel(Permits))
	beliefs := sw.tr.Beliefs()
	drift := w.Lockers[0].ClockDrift(w.cfg.TTL) // the clients' Lockers share their options
	over, excused := w.beyondLimit(beliefs, drift)
	var outside []leadercheck.Write
	var committed []string
	for _, wr := range leadercheck.OutsideBelief(beliefs, sw.tr.Writes()) {
		if wr.Accepted {
			outside = append(outside, wr)
		}
	}
	for _, wr := range sw.tr.Writes() {
		if wr.Accepted {
			committed = append(committed, wr.Who+"/"+fmt.Sprint(wr.Term))
		}
	}
	rows, backwards := sw.rows(t)

	t.Logf("%s: %d permits, %d writes, faults {%s}, stalls performed %d, acquisitions while %d others had not yet released %d, beyond the limit past the drift margin %d (%d across a fault that lost the holders), writes refused (permit ended) %d, lock timeouts/errors %d, tokens out of order per client %d, committed writes outside their permit %d",
		name, len(beliefs), sw.accepted.Load(), w.faultCounts(), w.stalled.Load(), Permits, w.overlaps.Load(), len(over)+excused, excused,
		sw.refused.Load(), w.lockErrs.Load(), backwards, len(outside))
	assert.Empty(t, sw.tr.Errors(), "reports that contradict the workload")
	for _, o := range over[:min(len(over), 3)] {
		t.Errorf("%s: more holders than permits (%d times; the first 3 shown): %s", name, len(over), o)
	}
	assert.Empty(t, outside[:min(len(outside), 3)], "writes committed while their permit had ended (%d; the first shown)", len(outside))
	slices.Sort(committed)
	slices.Sort(rows)
	assert.Equal(t, committed, rows, "the table holds the committed writes, and only those")
	assert.Zero(t, backwards, "a client's tokens must rise from permit to permit")
	assert.NotEmpty(t, beliefs, "no permit was granted")
	if w.cfg.Long > 0 && w.stalled.Load() > 0 {
		assert.Positive(t, sw.refused.Load(), "stalls past the lease must show up as refused writes")
	}
}

// rows returns the table's writes as "clientN/token", and how often a
// client's token went down in commit order.
func (sw *semWork) rows(t *testing.T) (out []string, backwards int) {
	rs, err := sw.pool.Query(context.Background(), `SELECT client, token FROM `+sw.table+` ORDER BY seq`)
	require.NoError(t, err)
	type row struct {
		Client int
		Token  int64
	}
	all, err := pgx.CollectRows(rs, pgx.RowToStructByPos[row])
	require.NoError(t, err)
	last := map[int]int64{}
	for _, r := range all {
		if r.Token < last[r.Client] {
			backwards++
		}
		last[r.Client] = r.Token
		out = append(out, fmt.Sprintf("client%d/%d", r.Client, r.Token))
	}
	return out, backwards
}

// beyondLimit returns, for each permit granted while Permits others were
// believed held past the drift margin, what it overlapped; those of the
// others that span a reset (a fault that lost the holders in the store,
// between their Acquire's call and this one's grant) do not count, and
// excused counts the permits that only they put beyond the limit.
func (w *World) beyondLimit(bs []leadercheck.Belief, drift time.Duration) (over []string, excused int) {
	resets, calls := w.semWindows()
	spans := func(a, b leadercheck.Belief) bool {
		for _, r := range resets {
			if !r[1].Before(calls[a.Term]) && !r[0].After(b.Start) {
				return true
			}
		}
		return false
	}
	for i, b := range bs {
		var live []leadercheck.Belief
		lost := 0
		for _, a := range bs[:i] {
			switch {
			case a.Who == b.Who || !a.End.After(b.Start.Add(drift)):
			case spans(a, b):
				lost++
			default:
				live = append(live, a)
			}
		}
		switch {
		case len(live) >= Permits:
			over = append(over, fmt.Sprintf("%s while %s", describe(b), describeAll(live)))
		case len(live)+lost >= Permits:
			excused++
		}
	}
	return over, excused
}

// semWindows returns the lossy windows, and each permit's Acquire call,
// by token, from the history.
func (w *World) semWindows() (resets [][2]time.Time, calls map[int64]time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at := func(ns int64) time.Time { return w.start.Add(time.Duration(ns)) }
	calls = map[int64]time.Time{}
	var from time.Time
	for _, op := range w.history {
		switch out := op.Output.(type) {
		case semLossy:
			if out.open {
				from = at(op.Call)
			} else {
				resets = append(resets, [2]time.Time{from, at(op.Return)})
			}
		case semAcquired:
			calls[out.token] = at(op.Call)
		}
	}
	return resets, calls
}

func describe(b leadercheck.Belief) string {
	return fmt.Sprintf("%s (token %d, %s..%s)", b.Who, b.Term, b.Start.Format("15:04:05.000000"), b.End.Format("15:04:05.000000"))
}

func describeAll(bs []leadercheck.Belief) string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = describe(b)
	}
	return strings.Join(out, ", ")
}
