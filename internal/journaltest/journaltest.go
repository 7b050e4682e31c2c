// Package journaltest checks a backend.TermJournal against its contract:
// the tests of every driver that keeps a journal (redisdriver, the etcd
// module's etcddriver) run the same checks.
package journaltest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/mutex/backend"
)

// Run checks j on key, which must have no journal yet (a plain key, as
// package election gives it: the driver applies its own prefix): each
// term is taken once, in increasing order, and a resignation only while
// its term is the newest; readers get a term's start and resignation
// folded together, and a blocked read the term appended meanwhile.
func Run(ctx context.Context, t *testing.T, j backend.TermJournal, key string) {
	t.Helper()
	at := time.UnixMilli(1_700_000_000_000)
	_, ok, err := j.LastTerm(ctx, key)
	require.NoError(t, err)
	require.False(t, ok)
	for _, tc := range []struct {
		term int64
		want bool
	}{{10, true}, {10, false}, {9, false}, {12, true}} {
		got, err := j.AppendTerm(ctx, key, backend.TermRecord{Term: tc.term, Value: "v", Owner: "o", At: at})
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "term %d", tc.term)
	}
	ok, err = j.ResignTerm(ctx, key, 10, at)
	require.NoError(t, err)
	assert.False(t, ok, "term 10 is not the newest")
	ok, err = j.ResignTerm(ctx, key, 12, at.Add(time.Second))
	require.NoError(t, err)
	assert.True(t, ok)

	last, ok, err := j.LastTerm(ctx, key)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, backend.TermRecord{Term: 12, Value: "v", Owner: "o", At: at, Resigned: true}, last)
	recs, err := j.Terms(ctx, key, 0, 0)
	require.NoError(t, err)
	assert.Equal(t, []backend.TermRecord{
		{Term: 10, Value: "v", Owner: "o", At: at},
		{Term: 12, Value: "v", Owner: "o", At: at, Resigned: true},
	}, recs)
	recs, err = j.Terms(ctx, key, 12, time.Millisecond)
	require.NoError(t, err)
	assert.Empty(t, recs)

	got := make(chan []backend.TermRecord)
	go func() {
		recs, _ := j.Terms(ctx, key, 12, 10*time.Second)
		got <- recs
	}()
	// The blocked read returns the term appended while it waits, or,
	// appended before it blocked, reads it at once.
	_, err = j.AppendTerm(ctx, key, backend.TermRecord{Term: 13, Value: "w", Owner: "o", At: at})
	require.NoError(t, err)
	assert.Equal(t, []backend.TermRecord{{Term: 13, Value: "w", Owner: "o", At: at}}, <-got)
}
