package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/etcd/internal/etcdtest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// The journal takes each term once, in increasing order, and a
// resignation only while its term is the newest; readers get a term's
// start and resignation folded together, and a blocked read the term
// appended meanwhile.
func TestTermJournal(t *testing.T) {
	b, _ := driver(t, server(t))
	ctx := testCtx(t)
	const key = "election:j"
	at := time.UnixMilli(1_700_000_000_000)

	_, ok, err := b.LastTerm(ctx, key)
	require.NoError(t, err)
	require.False(t, ok)
	for _, tc := range []struct {
		term int64
		want bool
	}{{10, true}, {10, false}, {9, false}, {12, true}} {
		got, err := b.AppendTerm(ctx, key, backend.TermRecord{Term: tc.term, Value: "v", Owner: "o", At: at})
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "term %d", tc.term)
	}
	ok, err = b.ResignTerm(ctx, key, 10, at)
	require.NoError(t, err)
	assert.False(t, ok, "term 10 is not the newest")
	ok, err = b.ResignTerm(ctx, key, 12, at.Add(time.Second))
	require.NoError(t, err)
	assert.True(t, ok)

	last, ok, err := b.LastTerm(ctx, key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, backend.TermRecord{Term: 12, Value: "v", Owner: "o", At: at, Resigned: true}, last)
	recs, err := b.Terms(ctx, key, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []backend.TermRecord{
		{Term: 10, Value: "v", Owner: "o", At: at},
		{Term: 12, Value: "v", Owner: "o", At: at, Resigned: true},
	}, recs)
	recs, err = b.Terms(ctx, key, 12, time.Millisecond)
	require.NoError(t, err)
	assert.Empty(t, recs)

	got := make(chan []backend.TermRecord)
	go func() {
		recs, _ := b.Terms(ctx, key, 12, 10*time.Second)
		got <- recs
	}()
	_, err = b.AppendTerm(ctx, key, backend.TermRecord{Term: 13, Value: "w", Owner: "o", At: at})
	require.NoError(t, err)
	assert.Equal(t, []backend.TermRecord{{Term: 13, Value: "w", Owner: "o", At: at}}, <-got)

	page, err := b.List(ctx, backend.ListRequest{Prefix: "", Count: 100, Scans: 1})
	require.NoError(t, err)
	assert.Empty(t, page.Keys, "journal keys are not locks")
}

// An election over etcd journals its terms: an observer sees every one
// in order, and another process reads the leader's value.
func TestElectionOnEtcd(t *testing.T) {
	onEach(t, func(t *testing.T, c *etcdtest.Cluster) {
		ctx := testCtx(t)
		elect := func() *election.Election {
			b, _ := driver(t, c)
			l := mutex.NewWithBackend(b)
			t.Cleanup(func() { _ = l.Close() })
			e, err := election.New(l, "etcd", election.WithLease(2*time.Second),
				election.WithRenewDeadline(1500*time.Millisecond), election.WithRetryPeriod(200*time.Millisecond))
			require.NoError(t, err)
			return e
		}
		a, watcher := elect(), elect()
		first, err := a.Campaign(ctx, "a")
		require.NoError(t, err)
		octx, stop := context.WithCancel(ctx)
		defer stop()
		seen := watcher.Observe(octx)
		require.Equal(t, first.Token(), (<-seen).Term)
		ld, err := watcher.Leader(ctx)
		require.NoError(t, err)
		assert.Equal(t, election.Leader{Value: "a", Term: first.Token(), Since: first.Since()}, ld)
		require.NoError(t, first.Resign(ctx))

		var issued []int64
		for range 10 {
			term, err := a.Campaign(ctx, "a")
			require.NoError(t, err)
			issued = append(issued, term.Token())
			require.NoError(t, term.Resign(ctx))
		}
		for i, want := range issued {
			require.Equal(t, want, (<-seen).Term, "term %d", i)
		}
		stop()
		for range seen {
		}
	})
}
