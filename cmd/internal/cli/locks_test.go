package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
)

// The owner infos of the test's Lockers, and how the command prints them.
var (
	holderInfo = mutex.OwnerInfo{Service: "billing", Label: "v1"}
	waiterInfo = mutex.OwnerInfo{Service: "reports", Label: "w1"}
)

func printed(info mutex.OwnerInfo) string {
	host, _ := os.Hostname()
	info.Host, info.PID = host, os.Getpid()
	return info.String()
}

// deployment is a Redis deployment as the test's Lockers reach it and as
// the command is told of it.
type deployment struct {
	name   string
	client func(t *testing.T) (c redis.UniversalClient, url string)
}

var deployments = []deployment{
	{"standalone", func(t *testing.T) (redis.UniversalClient, string) {
		c, srv := redistest.Redis(t)
		return c, "redis://" + srv.Addr() + "/0"
	}},
	{"sentinel", func(t *testing.T) (redis.UniversalClient, string) {
		set := redistest.Sentinel(t)
		c := set.Client()
		t.Cleanup(func() { _ = c.Close() })
		return c, "redis://" + set.Sentinel.Addr() + "?master_name=" + set.Name
	}},
	{"cluster", func(t *testing.T) (redis.UniversalClient, string) {
		cl := redistest.RedisCluster(t, 3)
		return cl.Client, "redis://" + cl.Masters[0].Addr() + "?cluster=true"
	}},
}

func newLocker(t *testing.T, c redis.UniversalClient, info mutex.OwnerInfo) *mutex.Locker {
	t.Helper()
	l, err := redistest.NewLocker(c, mutex.WithOwnerInfo(info))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	return l
}

// operator is the admin.Admin over l: what the commands read through.
func operator(t *testing.T, l *mutex.Locker) *admin.Admin {
	t.Helper()
	a, err := admin.New(l)
	require.NoError(t, err)
	return a
}

// queueWaiter starts a Lock of key by waiter, in the background, and waits
// until the key's queue shows it. The lock the waiter gets at last it
// releases at once; got waits for that, after the holder released.
func queueWaiter(t *testing.T, ctx context.Context, waiter, viewer *mutex.Locker, key string) (got func()) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		lk, err := waiter.Lock(ctx, key)
		if err == nil {
			err = lk.Release(ctx)
		}
		done <- err
	}()
	op := operator(t, viewer)
	waitFor(t, ctx, "the waiter never showed in the queue", func() bool {
		in, err := op.Inspect(ctx, key)
		require.NoError(t, err)
		return len(in.Waiters) == 1
	})
	return func() {
		t.Helper()
		select {
		case err := <-done:
			assert.NoError(t, err, "the waiter")
		case <-ctx.Done():
			t.Error("the waiter never got the lock")
		}
	}
}

// waitFor polls cond until it holds or ctx ends: for state that another
// Locker changes on the server, where there is nothing local to wait on.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// A lock held by this process, with a waiter from a second Locker, shows
// in locks (table and JSON) and inspect (words and JSON) with its owner's
// info, token and waiter, on one server, Sentinel and Cluster; a lock on
// another key that the pattern excludes does not.
func testLocksAndInspect(t *testing.T, bin binary) {
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, url := d.client(t)
			holder := newLocker(t, c, holderInfo)
			const ttl = 30 * time.Second
			lk, err := holder.Lock(ctx, "acct:1", mutex.WithTTL(ttl))
			require.NoError(t, err)
			// On Cluster, acct:1, report:7 and report:1 hash to the three
			// masters' slots (10076, 2961, 11095).
			for _, key := range []string{"report:7", "report:1"} {
				other, err := holder.Lock(ctx, key)
				require.NoError(t, err)
				t.Cleanup(func() { _ = other.Release(context.Background()) })
			}
			waiterGot := queueWaiter(t, ctx, newLocker(t, c, waiterInfo), holder, "acct:1")

			out := bin.ok(t, ctx, nil, "--redis", url, "locks", "acct:*")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			require.Len(t, lines, 2, "a header and one row:\n%s", out)
			assert.Regexp(t, `^KEY\s+STATE\s+TOKEN\s+OWNER\s+HELD FOR\s+LEASE LEFT\s+COUNT\s+WAITERS$`, lines[0])
			assert.Regexp(t, `^acct:1\s+held\s+`+strconv.FormatInt(lk.Token(), 10)+`\s+`+regexp.QuoteMeta(printed(holderInfo))+
				`\s+\d[\d.]*(ms|s)\s+\d[\d.]*s\s+1\s+1$`, lines[1])

			all := bin.ok(t, ctx, nil, "locks", "--redis", url) // flags after the command too
			for _, key := range []string{"acct:1", "report:1", "report:7"} {
				assert.Regexp(t, `(?m)^`+key+`\s+held\s`, all, "every master is listed")
			}

			var listed listingSchema
			require.NoError(t, json.Unmarshal([]byte(bin.ok(t, ctx, nil, "--redis", url, "locks", "--json", "acct:*")), &listed))
			assert.Equal(t, 2, listed.Schema)
			assert.True(t, listed.Complete)
			assert.Empty(t, listed.Skipped)
			assert.False(t, listed.Truncated)
			locks := listed.Locks
			require.Len(t, locks, 1)
			checkLockJSON(t, locks[0], lk, ttl, false)
			require.Len(t, locks[0].Waiters, 1)
			checkWaiterJSON(t, locks[0].Waiters[0])

			words := bin.ok(t, ctx, nil, "--redis", url, "inspect", "acct:1")
			for _, want := range []string{
				`(?m)^key\s+acct:1$`,
				`(?m)^state\s+held$`,
				`(?m)^token\s+` + strconv.FormatInt(lk.Token(), 10) + `$`,
				`(?m)^owner\s+` + regexp.QuoteMeta(printed(holderInfo)) + `$`,
				`(?m)^count\s+1 `,
				`(?m)^acquired\s+` + regexp.QuoteMeta(stamp(time.UnixMicro(lk.Token()))) + `, `,
				`(?m)^waited\s+yes`,
				`(?m)^waiters: 1, longest waiting first$`,
				`(?m)^  ` + regexp.QuoteMeta(printed(waiterInfo)) + `\s+\d[\d.]*(ms|s)\s+\S+\s+[0-9a-f]{32}@`,
				`(?m)^forced releases: none$`,
			} {
				assert.Regexp(t, want, words)
			}

			var in inspectSchema
			require.NoError(t, json.Unmarshal([]byte(bin.ok(t, ctx, nil, "--redis", url, "inspect", "--json", "acct:1")), &in))
			assert.Equal(t, 2, in.Schema)
			checkLockJSON(t, in.lockSchema, lk, ttl, false)
			require.Len(t, in.Waiters, 1)
			checkWaiterJSON(t, in.Waiters[0])
			assert.NotNil(t, in.Forced, "forced_releases is an array, empty")
			assert.Empty(t, in.Forced)
			assert.Nil(t, in.Nodes, "nodes are Redlock's")

			require.NoError(t, lk.Release(ctx))
			waiterGot()
		})
	}
}

// Redlock: the quorum's holder shows in locks and in inspect, with each
// node's view.
func testLocksAndInspectRedlock(t *testing.T, bin binary) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients, srvs := redistest.RedisN(t, 3)
	holder, err := redistest.NewRedlock(clients, mutex.WithOwnerInfo(holderInfo))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, holder.Close()) })
	const ttl = 30 * time.Second
	lk, err := holder.Lock(ctx, "batch", mutex.WithTTL(ttl))
	require.NoError(t, err)
	var flags []string
	for _, s := range srvs {
		flags = append(flags, "--redis", "redis://"+s.Addr())
	}

	out := bin.ok(t, ctx, nil, append(flags, "locks")...)
	assert.Regexp(t, `(?m)^batch\s+held\s+`+strconv.FormatInt(lk.Token(), 10)+`\s+`+regexp.QuoteMeta(printed(holderInfo))+`\s`, out)

	words := bin.ok(t, ctx, nil, append(flags, "inspect", "batch")...)
	assert.Regexp(t, `(?m)^state\s+held \(the quorum's view; each node's is below\)$`, words)
	assert.Regexp(t, `(?m)^token\s+`+strconv.FormatInt(lk.Token(), 10)+`$`, words)
	assert.Regexp(t, `(?m)^owner\s+`+regexp.QuoteMeta(printed(holderInfo))+`$`, words)
	assert.Regexp(t, `(?m)^waiters: Redlock keeps no queue$`, words)
	for i, s := range srvs {
		assert.Regexp(t, fmt.Sprintf(`(?m)^  %d\s+%s\s+held\s+%d\s+%s\s+\d`, i, regexp.QuoteMeta(s.Addr()), lk.Token(), regexp.QuoteMeta(printed(holderInfo))), words)
	}

	var in inspectSchema
	require.NoError(t, json.Unmarshal([]byte(bin.ok(t, ctx, nil, append(flags, "inspect", "--json", "batch")...)), &in))
	checkLockJSON(t, in.lockSchema, lk, ttl, true)
	require.Len(t, in.Nodes, 3)
	for i, n := range in.Nodes {
		assert.Equal(t, i, n.Node)
		assert.Equal(t, srvs[i].Addr(), n.Addr)
		assert.Nil(t, n.Error)
		require.NotNil(t, n.Lock)
		assert.Equal(t, "held", n.Lock.State)
		assert.Equal(t, lk.Token(), n.Lock.Token)
	}
	require.NoError(t, lk.Release(ctx))
}

func checkLockJSON(t *testing.T, j lockSchema, lk *mutex.Lock, ttl time.Duration, redlock bool) {
	t.Helper()
	host, _ := os.Hostname()
	assert.Equal(t, lk.Key(), j.Key)
	assert.Contains(t, j.RedisKey, lk.Key())
	assert.Equal(t, "held", j.State)
	assert.Equal(t, lk.Token(), j.Token)
	assert.Equal(t, &ownerSchema{Service: holderInfo.Service, Host: host, PID: os.Getpid(), Label: holderInfo.Label}, j.OwnerInfo)
	assert.Regexp(t, `^[0-9a-f]{32}@`, j.Owner)
	assert.Equal(t, 1, j.Count)
	require.NotNil(t, j.ServerTime)
	now, err := time.Parse(time.RFC3339Nano, *j.ServerTime)
	require.NoError(t, err, "server_time is RFC 3339")
	require.NotNil(t, j.RenewedAt)
	renewed, err := time.Parse(time.RFC3339Nano, *j.RenewedAt)
	require.NoError(t, err)
	assert.False(t, renewed.After(now))
	require.NotNil(t, j.AcquiredAt)
	acquired, err := time.Parse(time.RFC3339Nano, *j.AcquiredAt)
	require.NoError(t, err)
	want := time.UnixMicro(lk.Token())
	if redlock {
		// A Redlock token is the Locker's proposal: its clock, 100 ms ahead.
		want = want.Add(-100 * time.Millisecond)
	}
	assert.True(t, acquired.Equal(want), "acquired_at %s is the token's time", *j.AcquiredAt)
	require.NotNil(t, j.HeldMs)
	assert.InDelta(t, float64(now.Sub(acquired).Microseconds())/1000, *j.HeldMs, 0.0005, "held_ms is server_time - acquired_at, to the µs")
	assert.Greater(t, j.LeaseMs, 0.0)
	assert.LessOrEqual(t, j.LeaseMs, float64(ttl.Milliseconds()))
	assert.Nil(t, j.KeyHex, "a UTF-8 key has no key_hex")
	if redlock {
		require.NotNil(t, j.NoQueue, "an empty waiters list over Redlock says nothing: no_queue says so")
		assert.Equal(t, "Redlock keeps no queue", *j.NoQueue)
	} else {
		assert.Nil(t, j.NoQueue, "a single deployment keeps a queue")
	}
}

func checkWaiterJSON(t *testing.T, w waiterSchema) {
	t.Helper()
	host, _ := os.Hostname()
	assert.Equal(t, &ownerSchema{Service: waiterInfo.Service, Host: host, PID: os.Getpid(), Label: waiterInfo.Label}, w.OwnerInfo)
	assert.Regexp(t, `^[0-9a-f]{32}@`, w.Locker)
	require.NotNil(t, w.Since)
	_, err := time.Parse(time.RFC3339Nano, *w.Since)
	assert.NoError(t, err)
	assert.GreaterOrEqual(t, w.WaitedMs, 0.0)
}
