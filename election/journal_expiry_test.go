package election_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/testutil"
)

// Review (issue 38): the term journal lives 24h after its last entry
// (journalLife) and nothing renews it while a term lasts, so a leader
// that leads longer than a day outlives its journal: Leader then says
// nobody leads (and a new Observe sends no leader; the next Campaign after
// an unclean loss takes no lock-delay, as !ok counts as clean). The DEL
// stands in for the 24h expiry.
func TestReviewJournalExpiresUnderALongTerm(t *testing.T) {
	c, _ := testutil.Redis(t)
	ctx := testCtx(t)
	e := candidate(t, c, "long")
	term, err := e.Campaign(ctx, "me")
	require.NoError(t, err)
	defer resign(t, term)
	key := "redfence:{election:long}:terms"
	require.EqualValues(t, 1, c.Exists(ctx, key).Val(), "the journal's key name")
	require.NoError(t, c.Del(ctx, key).Err()) // what 24h without a new term does
	require.NoError(t, term.Context().Err())
	ld, err := e.Leader(ctx)
	assert.NoError(t, err, "a live term, yet Leader finds no leader")
	assert.Equal(t, term.Token(), ld.Term)
}
