package electiontest

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
)

// The term journal expires 24 h after its last entry and nothing renews it
// while a term lasts, so a term longer than a day outlives its journal.
// Leader then reads the lock's holder and still names the live term. The
// DEL stands in for the expiry.
func TestJournalExpiresUnderALongTerm(t *testing.T) {
	c, _ := redistest.Redis(t)
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
