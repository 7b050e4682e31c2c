package pgdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/journaltest"
	"github.com/redfence/redfence/pgdriver"
)

// TestElectionOverPostgres: an election over pgdriver Lockers of two
// processes, with the driver's term journal. The first candidate leads and
// everyone's Leader names it with its term and start; when it resigns its
// term's context ends and the waiting candidate leads with a greater term.
func TestElectionOverPostgres(t *testing.T) {
	_, schema := setup(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	la, _, _ := locker(t, schema, "candidate-a")
	lb, _, _ := locker(t, schema, "candidate-b")
	ea, err := election.New(la, "scheduler")
	require.NoError(t, err)
	eb, err := election.New(lb, "scheduler")
	require.NoError(t, err)

	_, err = eb.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
	ta, err := ea.Campaign(ctx, "replica-a")
	require.NoError(t, err)
	seen, err := eb.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "replica-a", seen.Value)
	assert.Equal(t, ta.Token(), seen.Term)
	assert.WithinDuration(t, time.Now(), seen.Since, time.Minute, "the term's start, on the database's clock")

	won := make(chan *election.Term, 1)
	campaigned := make(chan struct{})
	go func() {
		defer close(campaigned)
		tb, err := eb.Campaign(ctx, "replica-b")
		assert.NoError(t, err)
		won <- tb
	}()
	defer func() { cancel(); <-campaigned }() // a failed test ends the campaign before it returns
	require.NoError(t, ta.Release(ctx))
	select {
	case <-ta.Context().Done():
	case <-ctx.Done():
		t.Fatal("the resigned term's context did not end")
	}
	var tb *election.Term
	select {
	case tb = <-won:
	case <-ctx.Done():
		t.Fatal("the second candidate never led")
	}
	require.NotNil(t, tb)
	assert.Greater(t, tb.Token(), ta.Token(), "a later term is greater")
	seen, err = ea.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "replica-b", seen.Value)
	assert.Equal(t, tb.Token(), seen.Term)
	require.NoError(t, tb.Release(ctx))
}

// TestTermJournalContract: the journal passes the checks every driver's
// journal passes.
func TestTermJournalContract(t *testing.T) {
	pool, schema := setup(t)
	d, err := pgdriver.New(pool, pgdriver.WithSchema(schema))
	require.NoError(t, err)
	journaltest.Run(t.Context(), t, d, "election-key")
}
