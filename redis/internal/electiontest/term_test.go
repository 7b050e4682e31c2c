package electiontest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisfence"
)

// A term is a mutex.Hold: its deadline is the renew deadline after its
// last renewal (before the lock's lease runs out), moves on with each
// renewal, and is zero once the term ended; Release ends it and is
// idempotent.
func TestTermIsAHold(t *testing.T) {
	c, _ := redistest.Redis(t)
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

// TestEndedTermsLateWrite pins what a write after its term ended meets. On
// the term's context it stops at once: the fence sends nothing and the
// error is the context's. Under another context its token is still the
// resource's highest, so it is accepted (an equal token is the same
// holder) until a newer term writes; after that it is refused.
func TestEndedTermsLateWrite(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	a, b := candidate(t, c, "late"), candidate(t, c, "late")
	fence, err := redisfence.New(c)
	require.NoError(t, err)
	write := func(ctx context.Context, who string, term int64) error {
		return fence.Do(ctx, "ledger", term, nil, func(ctx context.Context, _ *redis.Tx, pipe redis.Pipeliner) error {
			pipe.Set(ctx, "writer:"+redisfence.Tag("ledger"), who, 0)
			return nil
		})
	}
	termA, err := a.Campaign(ctx, "a")
	require.NoError(t, err)
	require.NoError(t, write(termA.Context(), "a", termA.Token()))
	resign(t, termA)
	require.Error(t, termA.Context().Err(), "the term ended")

	err = write(termA.Context(), "a-on-its-term", termA.Token())
	require.ErrorIs(t, err, context.Canceled, "a write on the ended term's context stops at once")
	assert.Equal(t, "a", c.Get(ctx, "writer:"+redisfence.Tag("ledger")).Val(), "and wrote nothing")

	require.NoError(t, write(ctx, "a-late", termA.Token()), "no newer term wrote: the ended term's token is still accepted")

	termB, err := b.Campaign(ctx, "b")
	require.NoError(t, err)
	require.Greater(t, termB.Token(), termA.Token())
	require.NoError(t, write(termB.Context(), "b", termB.Token()))
	require.ErrorIs(t, write(ctx, "a-later", termA.Token()), redisfence.ErrStaleToken, "refused once a newer term wrote")
	assert.Equal(t, "b", c.Get(ctx, "writer:"+redisfence.Tag("ledger")).Val())
	resign(t, termB)
}
