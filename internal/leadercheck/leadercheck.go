// Package leadercheck judges a leader election from what its candidates
// said about themselves: when each began and stopped believing it leads,
// with which term, until which local lease deadline, and which fenced writes
// it made. The election tests (5 candidate processes under SIGSTOP and
// SIGKILL) and the chaos suite's election workload feed it; it holds no
// knowledge of the election package, so its checks are tested on their own.
//
// A belief ends at the earlier of the moment the candidate said it stopped
// and the last local lease deadline it reported: a paused or killed process
// cannot say it stopped, but its lock's guarantee ended at its deadline, and
// a correct candidate acts on its belief only before it (it checks both the
// term's context and the deadline before each write).
package leadercheck

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// Belief is one candidate's term as it saw it: from Start (when Campaign
// returned) to End (the earlier of its stop and its last reported deadline).
type Belief struct {
	Who   string
	Term  int64
	Start time.Time
	End   time.Time
}

// Write is one fenced write a leader made: decided at Decided (when it
// checked its belief), accepted or refused by the resource.
type Write struct {
	Who      string
	Term     int64
	Decided  time.Time
	Accepted bool
}

// Tracker collects candidates' reports into beliefs and writes. It is safe
// for concurrent use.
type Tracker struct {
	mu     sync.Mutex // guards everything below; takes nothing under it
	open   map[string]*Belief
	done   []Belief
	writes []Write
	errs   []string // reports that contradict the protocol
}

// NewTracker returns an empty Tracker.
func NewTracker() *Tracker { return &Tracker{open: map[string]*Belief{}} }

// Start records that who began to lead with term at at, its local lease
// deadline then being deadline. A belief still open for who ends first
// (at its deadline): who was deposed without noticing.
func (t *Tracker) Start(who string, term int64, at, deadline time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.open[who]; b != nil {
		t.errs = append(t.errs, fmt.Sprintf("%s started term %d while term %d was open", who, term, b.Term))
		t.closeLocked(who, b.End)
	}
	t.open[who] = &Belief{Who: who, Term: term, Start: at, End: deadline}
}

// Lease records that who's local lease deadline for term moved to deadline
// (a renewal).
func (t *Tracker) Lease(who string, term int64, deadline time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.open[who]
	if b == nil || b.Term != term {
		t.errs = append(t.errs, fmt.Sprintf("%s renewed term %d that it was not leading", who, term))
		return
	}
	b.End = deadline
}

// Stop records that who stopped believing it leads with term at at.
func (t *Tracker) Stop(who string, term int64, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.open[who]
	if b == nil || b.Term != term {
		t.errs = append(t.errs, fmt.Sprintf("%s stopped term %d that it was not leading", who, term))
		return
	}
	t.closeLocked(who, at)
}

// Gone records that who can report no more (killed): an open belief ends
// at its last deadline.
func (t *Tracker) Gone(who string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if b := t.open[who]; b != nil {
		t.closeLocked(who, b.End)
	}
}

// closeLocked ends who's open belief at the earlier of at and its deadline.
func (t *Tracker) closeLocked(who string, at time.Time) {
	b := t.open[who]
	if at.Before(b.End) {
		b.End = at
	}
	t.done = append(t.done, *b)
	delete(t.open, who)
}

// Write records a fenced write.
func (t *Tracker) Write(w Write) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes = append(t.writes, w)
}

// Beliefs returns every belief, open ones ending at their last deadline,
// ordered by Start.
func (t *Tracker) Beliefs() []Belief {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := slices.Clone(t.done)
	for _, b := range t.open {
		out = append(out, *b)
	}
	slices.SortFunc(out, func(a, b Belief) int { return a.Start.Compare(b.Start) })
	return out
}

// Writes returns the writes recorded, in the order they were.
func (t *Tracker) Writes() []Write {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.writes)
}

// Errors returns the reports that contradicted the protocol (a stop or a
// renewal of a term the candidate was not leading, a start while leading).
func (t *Tracker) Errors() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.errs)
}

// LockDeadline is the local lease deadline of l's lock with token (a
// term's lock): the last moment its holder may act as leader; zero when l
// is nil, no longer holds it or its deadline has passed (admin's Held
// clamps what is left at zero, and now plus zero would be a deadline still
// ahead of a caller's earlier now).
func LockDeadline(l *mutex.Locker, token int64) time.Time {
	a, err := admin.New(l)
	if err != nil {
		return time.Time{}
	}
	now := time.Now()
	for _, h := range a.Held() {
		if h.Token == token && h.Lease > 0 {
			return now.Add(h.Lease)
		}
	}
	return time.Time{}
}
