package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// A term is a mutex.Hold: its deadline is the renew deadline after its
// last renewal (before the lock's lease runs out), moves on with each
// renewal, and is zero once the term ended; Release ends it and is
// idempotent.
func TestTermIsAHold(t *testing.T) {
	c, _ := testutil.Redis(t)
	ctx := testCtx(t)
	e := candidate(t, c, "hold")
	before := time.Now()
	term, err := e.Campaign(ctx, "me")
	require.NoError(t, err)
	var h mutex.Hold = term
	assert.Positive(t, h.Token())
	require.NoError(t, h.Context().Err())
	first := h.Deadline()
	assert.True(t, first.After(before), "deadline %v is not after the campaign began", first)
	assert.False(t, first.After(time.Now().Add(renew)), "deadline %v is past the renew deadline", first)
	require.Eventually(t, func() bool { return h.Deadline().After(first) }, 5*time.Second, time.Millisecond,
		"a renewal moves the deadline")

	require.NoError(t, term.Release(ctx))
	assert.ErrorIs(t, context.Cause(h.Context()), election.ErrResigned)
	assert.True(t, h.Deadline().IsZero(), "an ended term has no deadline")
	require.NoError(t, term.Release(ctx), "a second Release returns the first one's result")
	var nilTerm *election.Term
	assert.True(t, nilTerm.Deadline().IsZero())
}
