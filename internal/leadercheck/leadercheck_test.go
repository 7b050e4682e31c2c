package leadercheck_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/redfence/redfence/internal/leadercheck"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC).Local() // Local, as Parse returns

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func belief(who string, term int64, from, to int) leadercheck.Belief {
	return leadercheck.Belief{Who: who, Term: term, Start: at(from), End: at(to)}
}

func TestOverlaps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		beliefs []leadercheck.Belief
		margin  time.Duration
		want    int
	}{
		{"disjoint", []leadercheck.Belief{belief("a", 1, 0, 100), belief("b", 2, 150, 300), belief("a", 3, 300, 400)}, 0, 0},
		{"touching is not overlapping", []leadercheck.Belief{belief("a", 1, 0, 100), belief("b", 2, 100, 200)}, 0, 0},
		{"overlap beyond the margin", []leadercheck.Belief{belief("a", 1, 0, 100), belief("b", 2, 90, 200)}, 5 * time.Millisecond, 1},
		{"overlap within the margin", []leadercheck.Belief{belief("a", 1, 0, 100), belief("b", 2, 97, 200)}, 5 * time.Millisecond, 0},
		{"input in any order", []leadercheck.Belief{belief("b", 2, 90, 200), belief("a", 1, 0, 100)}, 0, 1},
		// A long belief overlaps every later one that starts before its end,
		// not only its neighbour.
		{"one long belief over two", []leadercheck.Belief{belief("a", 1, 0, 500), belief("b", 2, 100, 150), belief("c", 3, 200, 250)}, 0, 2},
		{"contained", []leadercheck.Belief{belief("a", 1, 0, 500), belief("b", 2, 100, 150)}, 0, 1},
		{"empty belief (deadline before start)", []leadercheck.Belief{belief("a", 1, 0, 100), belief("b", 2, 50, 40)}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := leadercheck.Overlaps(tc.beliefs, tc.margin)
			assert.Len(t, got, tc.want, "%v", got)
		})
	}
	got := leadercheck.Overlaps([]leadercheck.Belief{belief("a", 1, 0, 100), belief("b", 2, 90, 200)}, 0)
	require.Len(t, got, 1)
	assert.Equal(t, 10*time.Millisecond, got[0].By)
	assert.Contains(t, got[0].String(), "a (term 1")
	assert.Contains(t, got[0].String(), "b (term 2")
}

func TestTermOrder(t *testing.T) {
	assert.Empty(t, leadercheck.TermOrder([]leadercheck.Belief{belief("a", 1, 0, 10), belief("b", 5, 20, 30), belief("c", 6, 40, 50)}))
	assert.Len(t, leadercheck.TermOrder([]leadercheck.Belief{belief("a", 5, 0, 10), belief("b", 4, 20, 30)}), 1, "a lower term later")
	assert.Len(t, leadercheck.TermOrder([]leadercheck.Belief{belief("a", 5, 0, 10), belief("b", 5, 20, 30)}), 1, "one term issued twice")
}

func TestOutsideBelief(t *testing.T) {
	bs := []leadercheck.Belief{belief("a", 1, 0, 100), belief("b", 2, 150, 300)}
	ws := []leadercheck.Write{
		{Who: "a", Term: 1, Decided: at(50), Accepted: true},
		{Who: "a", Term: 1, Decided: at(100), Accepted: true}, // at the end: still believed
		{Who: "b", Term: 2, Decided: at(200), Accepted: true},
	}
	assert.Empty(t, leadercheck.OutsideBelief(bs, ws))
	late := leadercheck.Write{Who: "a", Term: 1, Decided: at(160)}
	early := leadercheck.Write{Who: "b", Term: 2, Decided: at(140)}
	nobody := leadercheck.Write{Who: "c", Term: 3, Decided: at(200)}
	other := leadercheck.Write{Who: "a", Term: 2, Decided: at(200)} // b's term, a's write
	assert.Equal(t, []leadercheck.Write{late, early, nobody, other}, leadercheck.OutsideBelief(bs, append(ws, late, early, nobody, other)))
}

func TestBackwards(t *testing.T) {
	assert.Zero(t, leadercheck.Backwards(nil))
	assert.Zero(t, leadercheck.Backwards([]int64{1, 1, 2, 2, 2, 5}), "one leader writing several times")
	assert.Equal(t, 2, leadercheck.Backwards([]int64{1, 3, 2, 4, 1}))
}

func TestTracker(t *testing.T) {
	tr := leadercheck.NewTracker()
	// a leads, renews, stops before its deadline: it ends when it stopped.
	tr.Start("a", 1, at(0), at(100))
	tr.Lease("a", 1, at(200))
	tr.Stop("a", 1, at(150))
	// b leads and is paused: it says it stopped long after its deadline,
	// which ends its belief.
	tr.Start("b", 2, at(160), at(260))
	tr.Stop("b", 2, at(900))
	// c leads and is killed: its belief ends at its last deadline.
	tr.Start("c", 3, at(300), at(400))
	tr.Gone("c")
	// d still leads when the run ends.
	tr.Start("d", 4, at(500), at(600))
	tr.Write(leadercheck.Write{Who: "d", Term: 4, Decided: at(550), Accepted: true})
	assert.Equal(t, []leadercheck.Belief{
		belief("a", 1, 0, 150), belief("b", 2, 160, 260), belief("c", 3, 300, 400), belief("d", 4, 500, 600),
	}, tr.Beliefs())
	assert.Len(t, tr.Writes(), 1)
	assert.Empty(t, tr.Errors())

	// Reports that contradict the protocol are kept for the test to fail on.
	tr.Stop("a", 1, at(1000))
	tr.Lease("b", 7, at(1000))
	tr.Start("d", 5, at(700), at(800)) // d never said it stopped term 4
	assert.Len(t, tr.Errors(), 3)
	assert.Contains(t, tr.Beliefs(), belief("d", 4, 500, 600), "term 4 ended at its deadline")
}

func TestProtocolRoundTrip(t *testing.T) {
	for _, e := range []leadercheck.Event{
		{Kind: leadercheck.KindStart, Term: 7, At: at(1), Deadline: at(301)},
		{Kind: leadercheck.KindLease, Term: 7, Deadline: at(401)},
		{Kind: leadercheck.KindStop, Term: 7, At: at(350)},
		{Kind: leadercheck.KindAsk, Term: 7, At: at(20)},
		{Kind: leadercheck.KindWrite, Term: 7, At: at(20), Accepted: true},
		{Kind: leadercheck.KindWrite, Term: 7, At: at(20), Accepted: false},
	} {
		got, err := leadercheck.Parse(e.String())
		require.NoError(t, err, e.String())
		assert.Equal(t, e.Kind, got.Kind)
		assert.Equal(t, e.Term, got.Term)
		assert.True(t, e.At.Equal(got.At), e.String())
		assert.True(t, e.Deadline.Equal(got.Deadline), e.String())
		assert.Equal(t, e.Accepted, got.Accepted, e.String())
	}
	for _, bad := range []string{"", "start", "start 1 2", "lease x 1", "write 1 2 maybe", "write 1 x ok", "hello 1 2", "=== RUN TestX"} {
		_, err := leadercheck.Parse(bad)
		assert.ErrorIs(t, err, leadercheck.ErrBadLine, bad)
	}
}

func TestApply(t *testing.T) {
	tr := leadercheck.NewTracker()
	for _, line := range []string{
		leadercheck.Event{Kind: leadercheck.KindStart, Term: 3, At: at(0), Deadline: at(100)}.String(),
		leadercheck.Event{Kind: leadercheck.KindAsk, Term: 3, At: at(10)}.String(),
		leadercheck.Event{Kind: leadercheck.KindWrite, Term: 3, At: at(10), Accepted: true}.String(),
		leadercheck.Event{Kind: leadercheck.KindLease, Term: 3, Deadline: at(200)}.String(),
		leadercheck.Event{Kind: leadercheck.KindStop, Term: 3, At: at(120)}.String(),
	} {
		e, err := leadercheck.Parse(line)
		require.NoError(t, err)
		tr.Apply("x", e)
	}
	assert.Equal(t, []leadercheck.Belief{belief("x", 3, 0, 120)}, tr.Beliefs())
	assert.Equal(t, []leadercheck.Write{{Who: "x", Term: 3, Decided: at(10), Accepted: true}}, tr.Writes())
}
