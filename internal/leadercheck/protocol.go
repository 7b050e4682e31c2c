package leadercheck

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Kind is what a report line says.
type Kind string

// The reports a candidate process sends its parent, one a line.
const (
	KindStart Kind = "start" // began to lead: Term, At, Deadline
	KindLease Kind = "lease" // the local deadline moved: Term, Deadline
	KindStop  Kind = "stop"  // stopped believing it leads: Term, At
	KindAsk   Kind = "ask"   // about to write with Term, decided At; waits for the parent's go
	KindWrite Kind = "write" // wrote with Term, decided At: Accepted or refused
)

// Event is one report line.
type Event struct {
	Kind     Kind
	Term     int64
	At       time.Time // start, stop, ask, write
	Deadline time.Time // start, lease
	Accepted bool      // write
}

// ErrBadLine is returned by Parse for a line that is not a report.
var ErrBadLine = errors.New("leadercheck: not a report line")

// String is e's line, without the newline: kind, term, then nanoseconds
// since the epoch of the times the kind has, then for a write ok or stale.
func (e Event) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %d", e.Kind, e.Term)
	switch e.Kind {
	case KindStart:
		fmt.Fprintf(&b, " %d %d", e.At.UnixNano(), e.Deadline.UnixNano())
	case KindLease:
		fmt.Fprintf(&b, " %d", e.Deadline.UnixNano())
	case KindStop, KindAsk:
		fmt.Fprintf(&b, " %d", e.At.UnixNano())
	case KindWrite:
		res := "stale"
		if e.Accepted {
			res = "ok"
		}
		fmt.Fprintf(&b, " %d %s", e.At.UnixNano(), res)
	}
	return b.String()
}

// Parse reads a line that String wrote.
func Parse(line string) (Event, error) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return Event{}, fmt.Errorf("%w: %q", ErrBadLine, line)
	}
	e := Event{Kind: Kind(f[0])}
	want := map[Kind]int{KindStart: 4, KindLease: 3, KindStop: 3, KindAsk: 3, KindWrite: 4}[e.Kind]
	if want == 0 || len(f) != want {
		return Event{}, fmt.Errorf("%w: %q", ErrBadLine, line)
	}
	numeric := f[1:]
	if e.Kind == KindWrite {
		numeric = f[1:3]
	}
	nums := make([]int64, len(numeric))
	for i, s := range numeric {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Event{}, fmt.Errorf("%w: %q", ErrBadLine, line)
		}
		nums[i] = n
	}
	e.Term = nums[0]
	switch e.Kind {
	case KindStart:
		e.At, e.Deadline = time.Unix(0, nums[1]), time.Unix(0, nums[2])
	case KindLease:
		e.Deadline = time.Unix(0, nums[1])
	case KindStop, KindAsk:
		e.At = time.Unix(0, nums[1])
	case KindWrite:
		e.At = time.Unix(0, nums[1])
		if f[3] != "ok" && f[3] != "stale" {
			return Event{}, fmt.Errorf("%w: %q", ErrBadLine, line)
		}
		e.Accepted = f[3] == "ok"
	}
	return e, nil
}

// Apply records e, a report of who, in t (an ask records nothing).
func (t *Tracker) Apply(who string, e Event) {
	switch e.Kind {
	case KindStart:
		t.Start(who, e.Term, e.At, e.Deadline)
	case KindLease:
		t.Lease(who, e.Term, e.Deadline)
	case KindStop:
		t.Stop(who, e.Term, e.At)
	case KindWrite:
		t.Write(Write{Who: who, Term: e.Term, Decided: e.At, Accepted: e.Accepted})
	}
}
