package electiontest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/redisdriver"
)

// Terms far shorter than any poll: the observer still sees each one,
// in the order Campaign issued them.
func TestObserveSeesEveryTermInOrder(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	a, b := candidate(t, c, "every"), candidate(t, c, "every")
	first, err := a.Campaign(ctx, "a")
	require.NoError(t, err)

	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := a.Observe(octx)
	got := next(t, seen) // the current leader: the observer is connected
	require.Equal(t, election.Leader{Value: "a", Term: first.Token(), Since: first.Since()}, got)
	resign(t, first)

	var issued []int64
	for i := range 20 {
		e, v := a, "a"
		if i%2 == 1 {
			e, v = b, "b"
		}
		term, err := e.Campaign(ctx, v)
		require.NoError(t, err)
		issued = append(issued, term.Token())
		resign(t, term)
	}
	for i, want := range issued {
		ld := next(t, seen)
		require.Equal(t, want, ld.Term, "term %d", i)
		assert.Equal(t, map[bool]string{true: "b", false: "a"}[i%2 == 1], ld.Value)
	}
	stop()
	for range seen { // closed once ctx ended
	}
}

// An observer cut off while terms come and go resumes with the current
// one, never going back to a lower term.
func TestObserveResumesAfterReconnect(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx := testCtx(t)
	pc, proxy := proxied(t, srv)
	watcher, cand := candidate(t, pc, "resume"), candidate(t, c, "resume")

	first, err := cand.Campaign(ctx, "c")
	require.NoError(t, err)
	seen := watcher.Observe(ctx)
	require.Equal(t, first.Token(), next(t, seen).Term)
	resign(t, first)

	proxy.Cut()
	proxy.BlackHole()
	var current *election.Term
	for range 5 {
		if current != nil {
			resign(t, current)
		}
		current, err = cand.Campaign(ctx, "c")
		require.NoError(t, err)
	}
	proxy.Heal()
	last := first.Token()
	for last != current.Token() {
		ld := next(t, seen)
		require.Greater(t, ld.Term, last, "never a lower or equal term")
		last = ld.Term
	}
	assert.Equal(t, current.Token(), last)
	resign(t, current)
}

// Without a journal (Redlock) Observe polls Leader: it sees the current
// leader, and terms only go up.
func TestObservePollsWithoutJournal(t *testing.T) {
	clients, _ := redistest.RedisN(t, 3)
	ctx := testCtx(t)
	a, b := redlockCandidate(t, clients, "poll"), redlockCandidate(t, clients, "poll")
	ta, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	seen := b.Observe(ctx)
	require.Equal(t, election.Leader{Value: "a", Term: ta.Token()}, withoutSince(next(t, seen)))
	resign(t, ta)
	tb, err := b.Campaign(ctx, "b")
	require.NoError(t, err)
	ld := next(t, seen)
	require.Equal(t, election.Leader{Value: "b", Term: tb.Token()}, withoutSince(ld))
	resign(t, tb)
	_, err = a.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader)
}

func withoutSince(ld election.Leader) election.Leader { ld.Since = time.Time{}; return ld }

// Leader reads the value and term from outside the leader's process.
func TestLeaderFromAnotherLocker(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	a, other := candidate(t, c, "who"), candidate(t, c, "who")
	_, err := other.Leader(ctx)
	require.True(t, errors.Is(err, election.ErrNoLeader), "%v", err)
	term, err := a.Campaign(ctx, "host-7:8080")
	require.NoError(t, err)
	ld, err := other.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, election.Leader{Value: "host-7:8080", Term: term.Token(), Since: term.Since()}, ld)
	resign(t, term)
	_, err = other.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader)
}

// journalOnly is a backend with a term journal and no inspection.
type journalOnly struct {
	backend.Backend
	backend.TermJournal
}

// Without inspection, an observer starts from the journal's last term
// (unless resigned) and Leader says it cannot tell.
func TestObserveWithoutInspection(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	d, err := redisdriver.New(c)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() }) // journalOnly is no io.Closer: the Lockers leave d open
	elect := func() *election.Election {
		e, err := election.New(testutil.WithBackend(t, journalOnly{d, d}), "no-inspect", timing()...)
		require.NoError(t, err)
		return e
	}
	a, watcher := elect(), elect()
	term, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	_, err = watcher.Leader(ctx)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	seen := watcher.Observe(ctx)
	require.Equal(t, election.Leader{Value: "a", Term: term.Token(), Since: term.Since()}, next(t, seen))
	resign(t, term)
	again, err := a.Campaign(ctx, "a2")
	require.NoError(t, err)
	require.Equal(t, again.Token(), next(t, seen).Term)
	resign(t, again)
}
