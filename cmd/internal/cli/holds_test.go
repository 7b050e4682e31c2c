package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// leaderInfo is the OwnerInfo of the test's election candidates.
var leaderInfo = mutex.OwnerInfo{Service: "scheduler", Label: "blue"}

// holdsFixture is a live election, a semaphore with every permit held and
// two read-write locks, one held for writing and one by two readers.
type holdsFixture struct {
	term    *election.Term
	permits []*mutex.Permit
	writer  *mutex.RWHold
	readers []*mutex.RWHold
}

func newHoldsFixture(t *testing.T, ctx context.Context, c redis.UniversalClient) holdsFixture {
	t.Helper()
	var f holdsFixture
	e, err := election.New(newLocker(t, c, leaderInfo), "scheduler")
	require.NoError(t, err)
	f.term, err = e.Campaign(ctx, "replica-1")
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.term.Release(context.Background()) })
	l := newLocker(t, c, holderInfo)
	s, err := mutex.NewSemaphore(l, "exports", 3, mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	for range 3 {
		p, err := s.Acquire(ctx)
		require.NoError(t, err)
		f.permits = append(f.permits, p)
	}
	prices, err := mutex.NewRWMutex(l, "prices", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	f.writer, err = prices.Lock(ctx)
	require.NoError(t, err)
	config, err := mutex.NewRWMutex(newLocker(t, c, waiterInfo), "config", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	for range 2 {
		r, err := config.RLock(ctx)
		require.NoError(t, err)
		f.readers = append(f.readers, r)
	}
	return f
}

// runOK runs the command in process against url and returns its
// output, requiring success.
func runOK(t *testing.T, ctx context.Context, url string, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(ctx, append([]string{"--redis", url}, args...), noEnv, nil, &stdout, &stderr)
	require.Zero(t, code, "redfence %q: %s", args, stderr.String())
	return stdout.String()
}

// locks lists, beside the locks, every permit of a semaphore and every
// hold of a read-write lock with its holder's owner info; an election's
// lock shows its leader's host and pid as every other holder does. The
// JSON has them under semaphores and rwlocks, each holder with its
// owner_info.
func TestLocksListsSemaphoresAndRWLocks(t *testing.T) {
	for _, d := range []deployment{deployments[0], deployments[2]} {
		t.Run(d.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			c, url := d.client(t)
			f := newHoldsFixture(t, ctx, c)

			out := runOK(t, ctx, url, "locks")
			term := strconv.FormatInt(f.term.Token(), 10)
			assert.Regexp(t, `(?m)^election:scheduler +held +`+term+` +`+regexp.QuoteMeta(printed(leaderInfo))+` `, out)
			assert.NotContains(t, out, "election.", "the raw owner id is not what the table shows")
			for _, p := range f.permits {
				assert.Regexp(t, `(?m)^exports +3 of 3 +`+strconv.FormatInt(p.Token(), 10)+` +`+regexp.QuoteMeta(printed(holderInfo))+` +[0-9.]+s`, out)
			}
			assert.Regexp(t, `(?m)^prices +write +`+strconv.FormatInt(f.writer.Token(), 10)+` +`+regexp.QuoteMeta(printed(holderInfo))+` +[0-9.]+s +0$`, out)
			assert.Len(t, regexp.MustCompile(`(?m)^config +read +- +`+regexp.QuoteMeta(printed(waiterInfo))+` `).FindAllString(out, -1), 2, out)
			assert.NotContains(t, runOK(t, ctx, url, "locks", "exp*"), "prices", "the pattern narrows semaphores and read-write locks too")

			var ls listingSchema
			require.NoError(t, json.Unmarshal([]byte(runOK(t, ctx, url, "locks", "--json")), &ls))
			require.Len(t, ls.Locks, 1)
			host, _ := os.Hostname()
			assert.Equal(t, &ownerSchema{Service: leaderInfo.Service, Host: host, PID: os.Getpid(), Label: leaderInfo.Label}, ls.Locks[0].OwnerInfo)
			require.NotNil(t, ls.Semaphores)
			require.Len(t, *ls.Semaphores, 1)
			sem := (*ls.Semaphores)[0]
			assert.Equal(t, "exports", sem.Key)
			assert.Equal(t, 3, sem.Limit)
			require.Len(t, sem.Holders, 3)
			for _, h := range sem.Holders {
				assert.Equal(t, &ownerSchema{Service: holderInfo.Service, Host: host, PID: os.Getpid(), Label: holderInfo.Label}, h.OwnerInfo)
				assert.Positive(t, h.LeaseMs)
			}
			require.NotNil(t, ls.RWLocks)
			require.Len(t, *ls.RWLocks, 2)
			cfg, prices := (*ls.RWLocks)[0], (*ls.RWLocks)[1]
			assert.Equal(t, "config", cfg.Key, "by key")
			assert.Nil(t, cfg.Writer)
			require.Len(t, cfg.Readers, 2)
			assert.Equal(t, waiterInfo.Service, cfg.Readers[0].OwnerInfo.Service)
			require.NotNil(t, prices.Writer)
			assert.Equal(t, f.writer.Token(), prices.Writer.Token)
			assert.Equal(t, f.writer.Token(), prices.LastWrite)

			for _, r := range f.readers {
				require.NoError(t, r.Release(ctx))
			}
			require.NoError(t, json.Unmarshal([]byte(runOK(t, ctx, url, "locks", "--json", "config")), &ls))
			require.NotNil(t, ls.RWLocks, "listed, and none held: [] rather than absent")
			assert.Empty(t, *ls.RWLocks)
		})
	}
}

// Over Redlock, which keeps neither, a listing's JSON has no semaphores
// or rwlocks: their absence claims nothing.
func TestLocksRedlockClaimsNoSemaphores(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, srvs := redistest.RedisN(t, 3)
	var args []string
	for _, s := range srvs {
		args = append(args, "--redis", "redis://"+s.Addr())
	}
	var stdout, stderr bytes.Buffer
	code := run(ctx, append(args, "locks", "--json"), noEnv, nil, &stdout, &stderr)
	require.Zero(t, code, stderr.String())
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	assert.Contains(t, doc, "locks")
	assert.NotContains(t, slices.Collect(maps.Keys(doc)), "semaphores")
	assert.NotContains(t, slices.Collect(maps.Keys(doc)), "rwlocks")
}

// inspect never calls a key free while a permit of its semaphore or a
// hold of its read-write lock is held: the state says what holds it, and
// the JSON's held_as lists it; a key nothing holds is free in both. An
// election's key shows its leader's owner info.
func TestInspectNeverCallsAHeldKeyFree(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, srv := redistest.Redis(t)
	url := "redis://" + srv.Addr()
	newHoldsFixture(t, ctx, c)
	state := regexp.MustCompile(`(?m)^state +(.*)$`)

	for key, want := range map[string]string{
		"exports": "held as a semaphore, 3 of 3 permits (below); its lock is free",
		"prices":  "held as a read-write lock, held for writing (below); its lock is free",
		"config":  "held as a read-write lock, 2 readers (below); its lock is free",
		"nothing": "free: nobody holds it",
	} {
		out := runOK(t, ctx, url, "inspect", key)
		m := state.FindStringSubmatch(out)
		require.NotNil(t, m, out)
		assert.Equal(t, want, m[1], key)
		if key != "nothing" {
			assert.NotContains(t, out, "nobody holds it", key)
		}
	}
	for key, want := range map[string][]string{
		"exports":            {"semaphore"},
		"prices":             {"rwlock"},
		"nothing":            {},
		"election:scheduler": {"lock"},
	} {
		var j inspectSchema
		require.NoError(t, json.Unmarshal([]byte(runOK(t, ctx, url, "inspect", "--json", key)), &j))
		assert.Equal(t, want, j.HeldAs, key)
		if key != "election:scheduler" {
			assert.Equal(t, "free", j.State, "%s: state stays the lock's", key)
		}
	}

	sem, err := mutex.NewSemaphore(newLocker(t, c, holderInfo), "election:scheduler", 1, mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	p, err := sem.Acquire(ctx)
	require.NoError(t, err)
	out := runOK(t, ctx, url, "inspect", "election:scheduler")
	assert.Equal(t, "held; also as a semaphore, 1 of 1 permits (below)", state.FindStringSubmatch(out)[1])
	assert.Regexp(t, `(?m)^owner +`+regexp.QuoteMeta(printed(leaderInfo))+`$`, out, "the leader's host and pid")
	assert.Regexp(t, `(?m)^owner id +election\.[0-9a-f]{24}\.replica-1@`, out)
	require.NoError(t, p.Release(ctx))
}
