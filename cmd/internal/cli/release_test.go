package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// release --force --fence: the holder's lock context ends with
// ErrLockLost at its next renewal, before its lease would have run out;
// the next holder's token exceeds the old one and the printed floor; the
// old holder's fenced write is refused; the audit entry shows in inspect;
// fences lists the raised fence.
func testReleaseForce(t *testing.T, bin binary) {
	c, srv := redistest.Redis(t)
	url := "redis://" + srv.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := testutil.Postgres(t)
	guard, err := fenced.New(pool)
	require.NoError(t, err)
	require.NoError(t, guard.Migrate(ctx))
	dbEnv := []string{"DATABASE_URL=" + testutil.PostgresURL(t)}
	write := func(token int64) error {
		return guard.Do(ctx, "acct:1", token, func(context.Context, pgx.Tx) error { return nil })
	}

	holder := newLocker(t, c, holderInfo)
	const ttl = 3 * time.Second // renewed every second
	lk, err := holder.Lock(ctx, "acct:1", mutex.WithTTL(ttl))
	require.NoError(t, err)
	require.NoError(t, write(lk.Token()), "the holder writes while it holds the lock")

	lostAt := make(chan time.Time, 1)
	go func() { <-lk.Context().Done(); lostAt <- time.Now() }() // ends at Close at the latest
	lateness := testutil.MeasureLateness(t)
	held := operator(t, holder).Held()
	require.Len(t, held, 1)
	localDeadline := time.Now().Add(held[0].Lease)
	out := bin.ok(t, ctx, dbEnv, "--redis", url, "release", "acct:1", "--force", "--reason", "stuck job", "--by", "alice", "--fence", "acct:1", "--yes")
	released := time.Now()
	token := printedInt(t, out, `(?m)^  token\s+(\d+): the holder's`)
	floor := printedInt(t, out, `(?m)^  floor\s+(\d+): every later token`)
	assert.Equal(t, lk.Token(), token, "the holder's token:\n%s", out)
	assert.Greater(t, floor, token)
	assert.Regexp(t, `(?m)^released "acct:1" by force$`, out)
	assert.Regexp(t, `(?m)^  holder\s+`+regexp.QuoteMeta(printed(holderInfo))+`$`, out)
	assert.Regexp(t, `(?m)^  audit\s+by alice, reason "stuck job"$`, out)
	assert.Regexp(t, `(?m)^fence of "acct:1" in redfence_fences raised: highest token `+strconv.FormatInt(floor, 10)+`;`, out)

	// Refused at once, by the raised fence, before the holder's renewal
	// could notice anything.
	assert.ErrorIs(t, write(lk.Token()), fenced.ErrStaleToken, "the old holder's write after the release")

	select {
	case lost := <-lostAt:
		assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
		assert.True(t, lost.Before(localDeadline), "the holder learnt it only when its lease ran out, not from its renewal")
		assert.LessOrEqual(t, lost.Sub(released), lateness.Bound(ttl/3+100*time.Millisecond), "more than one renewal interval after the release")
	case <-ctx.Done():
		t.Fatal("the old holder never learnt it lost the lock")
	}

	next, err := newLocker(t, c, waiterInfo).Lock(ctx, "acct:1")
	require.NoError(t, err)
	assert.Greater(t, next.Token(), lk.Token())
	assert.Greater(t, next.Token(), floor)
	assert.NoError(t, write(next.Token()), "the next holder writes")

	words := bin.ok(t, ctx, nil, "--redis", url, "inspect", "acct:1")
	assert.Regexp(t, `(?m)^forced releases: 1, latest first$`, words)
	assert.Regexp(t, `(?m)^  \S+\s+alice\s+stuck job\s+`+strconv.FormatInt(token, 10)+` → `+strconv.FormatInt(floor, 10)+`\s+`+regexp.QuoteMeta(printed(holderInfo))+`$`, words)
	var in inspectSchema
	require.NoError(t, json.Unmarshal([]byte(bin.ok(t, ctx, nil, "--redis", url, "inspect", "--json", "acct:1")), &in))
	require.Len(t, in.Forced, 1)
	f := in.Forced[0]
	assert.Equal(t, "alice", f.By)
	assert.Equal(t, "stuck job", f.Reason)
	assert.Equal(t, token, f.Token)
	assert.Equal(t, floor, f.Floor)
	assert.Equal(t, "billing", f.OwnerInfo.Service)
	require.NotNil(t, f.At)
	at, err := time.Parse(time.RFC3339Nano, *f.At)
	require.NoError(t, err)
	assert.WithinDuration(t, time.Now(), at, time.Minute)
	assert.Equal(t, next.Token(), in.Token, "inspect shows the next holder")

	t.Run("FencesListsTheRaisedFence", func(t *testing.T) {
		out := bin.ok(t, ctx, dbEnv, "fences", "acct:")
		assert.Regexp(t, `^RESOURCE\s+TOKEN\s+UPDATED\n`, out)
		// The next holder's write raised it further.
		assert.Regexp(t, `(?m)^acct:1\s+`+strconv.FormatInt(next.Token(), 10)+`\s+\d{4}-\d\d-\d\dT`, out)
		var doc struct {
			Schema int `json:"schema"`
			Fences []struct {
				Resource  string  `json:"resource"`
				Token     int64   `json:"token"`
				UpdatedAt *string `json:"updated_at"`
			} `json:"fences"`
		}
		require.NoError(t, json.Unmarshal([]byte(bin.ok(t, ctx, dbEnv, "fences", "--json")), &doc))
		assert.Equal(t, 2, doc.Schema)
		fences := doc.Fences
		require.Len(t, fences, 1)
		assert.Equal(t, "acct:1", fences[0].Resource)
		assert.Equal(t, next.Token(), fences[0].Token)
		assert.NotNil(t, fences[0].UpdatedAt)
	})
	require.NoError(t, next.Release(ctx))
}

// release changes nothing it was not asked to end: a free key, a lock held
// under another token than --token, and any lock without --force.
func testReleaseRefuses(t *testing.T, bin binary) {
	c, srv := redistest.Redis(t)
	url := "redis://" + srv.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lk, err := newLocker(t, c, holderInfo).Lock(ctx, "acct:2", mutex.WithTTL(time.Minute))
	require.NoError(t, err)

	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"free key", []string{"release", "acct:3", "--force", "--reason", "r"}, 1,
			"redfence: nobody holds \"acct:3\"\n"},
		{"another token", []string{"release", "acct:2", "--force", "--reason", "r", "--token", strconv.FormatInt(lk.Token()-1, 10)}, 1,
			"redfence: \"acct:2\" is held under token " + strconv.FormatInt(lk.Token(), 10) + ", not " + strconv.FormatInt(lk.Token()-1, 10) + "\n"},
		{"no --force", []string{"release", "acct:2", "--reason", "r"}, 2,
			"redfence: " + refusal + ".\n"},
		{"no --reason", []string{"release", "acct:2", "--force"}, 2,
			"redfence: a forced release needs --reason TEXT: it goes to the audit stream beside the key\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := bin.run(t, ctx, nil, append([]string{"--redis", url}, tc.args...)...)
			assert.Equal(t, tc.code, o.code)
			assert.Contains(t, o.stderr, tc.stderr)
			assert.Empty(t, o.stdout)
			assert.NoError(t, lk.Context().Err(), "the holder lost its lock")
			in, err := operator(t, newLocker(t, c, mutex.OwnerInfo{})).Inspect(ctx, "acct:2")
			require.NoError(t, err)
			assert.Equal(t, admin.Held, in.State)
			assert.Equal(t, lk.Token(), in.Token)
			assert.Empty(t, in.Forced)
		})
	}
	require.NoError(t, lk.Release(ctx))
}

// printedInt is the number re's group matches in out.
func printedInt(t *testing.T, out, re string) int64 {
	t.Helper()
	m := regexp.MustCompile(re).FindStringSubmatch(out)
	require.NotNil(t, m, "%s not in:\n%s", re, out)
	n, err := strconv.ParseInt(m[1], 10, 64)
	require.NoError(t, err)
	return n
}
