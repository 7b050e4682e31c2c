package electiontest

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// The lock of a term carries its candidate's Locker's OwnerInfo, so that
// inspection shows the leader's host and pid as every other holder's;
// Leader still reads the value back, whatever bytes it has.
func TestLeaderLockCarriesOwnerInfo(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	info := mutex.OwnerInfo{Service: "scheduler", Label: "blue"}
	e, err := election.New(redistest.Locker(t, c, mutex.WithOwnerInfo(info)), "cron", timing()...)
	require.NoError(t, err)
	value := "replica-1@zone=a&p=9"
	term, err := e.Campaign(ctx, value)
	require.NoError(t, err)
	defer resign(t, term)

	viewer, err := admin.New(redistest.Locker(t, c))
	require.NoError(t, err)
	in, err := viewer.Inspect(ctx, e.Key())
	require.NoError(t, err)
	host, _ := os.Hostname()
	assert.Equal(t, mutex.OwnerInfo{Service: "scheduler", Host: host, PID: os.Getpid(), Label: "blue"}, in.Info)
	assert.True(t, strings.HasPrefix(in.Owner, "election."), in.Owner)
	assert.Contains(t, in.Owner, "."+value+"@", "the value, then the Locker's OwnerInfo")

	ld, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, value, ld.Value)
	assert.Equal(t, term.Token(), ld.Term)
}

// A value and an OwnerInfo too long together for an owner id leave the
// OwnerInfo out, and the value whole; an older candidate's id, which has
// none, reads as it did.
func TestLeaderValueWithoutOwnerInfo(t *testing.T) {
	c, _ := redistest.Redis(t)
	ctx := testCtx(t)
	long := mutex.OwnerInfo{Label: strings.Repeat("l", 220)}
	e, err := election.New(redistest.Locker(t, c, mutex.WithOwnerInfo(long)), "big", timing()...)
	require.NoError(t, err)
	value := strings.Repeat("v", election.MaxValueLen)
	term, err := e.Campaign(ctx, value)
	require.NoError(t, err)
	viewer, err := admin.New(redistest.Locker(t, c))
	require.NoError(t, err)
	in, err := viewer.Inspect(ctx, e.Key())
	require.NoError(t, err)
	assert.Zero(t, in.Info, "no room for the OwnerInfo")
	ld, err := e.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, value, ld.Value)
	resign(t, term)

	// An older candidate's lock: "election.", 24 hex digits, ".", value.
	l := redistest.Locker(t, c)
	old, err := election.New(l, "old", timing()...)
	require.NoError(t, err)
	lk, err := l.Lock(ctx, old.Key(), mutex.WithOwner("election.0123456789abcdef01234567.host@7"), mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	ld, err = old.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, "host@7", ld.Value)
	require.NoError(t, lk.Release(ctx))
}
