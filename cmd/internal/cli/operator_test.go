package cli

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

// redlockFlags starts n Redlock masters and returns clients that fail at
// once on a dead node, and the command's flags for them.
func redlockFlags(t *testing.T, n int) ([]redis.UniversalClient, []*redistest.RedisServer, []string) {
	t.Helper()
	_, srvs := redistest.RedisN(t, n)
	clients := make([]redis.UniversalClient, n)
	var flags []string
	for i, s := range srvs {
		c := redis.NewClient(&redis.Options{Addr: s.Addr(), DialTimeout: 200 * time.Millisecond, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		clients[i] = c
		flags = append(flags, "--redis", "redis://"+s.Addr())
	}
	return clients, srvs, flags
}

// The listing never says "no locks" when it could not look: with a
// majority of Redlock nodes it prints what it found and says it is
// partial; without, it fails, in the table and in JSON, with status 1.
func testRedlockListingNeedsAQuorum(t *testing.T, bin binary) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clients, srvs, flags := redlockFlags(t, 3)
	holder, err := redistest.NewRedlock(clients, mutex.WithOwnerInfo(holderInfo))
	require.NoError(t, err)
	t.Cleanup(func() { _ = holder.Close() })
	lk, err := holder.Lock(ctx, "batch", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	waitFor(t, ctx, "every node holds the lock", func() bool { // (Lock returns at a quorum)
		for _, c := range clients {
			if c.Exists(ctx, "redfence:{batch}").Val() != 1 {
				return false
			}
		}
		return true
	})

	// A hung node is skipped within the page's deadline, not waited for.
	srvs[2].Pause()
	o := bin.run(t, ctx, nil, append(flags, "--timeout", "3s", "locks")...)
	srvs[2].Resume()
	assert.Equal(t, 1, o.code)
	assert.Regexp(t, `(?m)^batch\s+held\s+`+strconv.FormatInt(lk.Token(), 10)+`\s`, o.stdout, "what the majority holds is listed")
	assert.Contains(t, o.stderr, "redfence: the listing is partial: scan node 2 ("+srvs[2].Addr()+")")

	srvs[2].Kill()
	o = bin.run(t, ctx, nil, append(flags, "locks")...)
	assert.Equal(t, 1, o.code)
	assert.Regexp(t, `(?m)^batch\s+held\s+`+strconv.FormatInt(lk.Token(), 10)+`\s`, o.stdout, "what the majority holds is listed")
	assert.Contains(t, o.stderr, "redfence: the listing is partial: ")
	assert.Contains(t, o.stderr, srvs[2].Addr())
	o = bin.run(t, ctx, nil, append(flags, "locks", "--json")...)
	assert.Equal(t, 1, o.code)
	var listed listingSchema
	require.NoError(t, json.Unmarshal([]byte(o.stdout), &listed), o.stdout)
	assert.False(t, listed.Complete)
	assert.NotEmpty(t, listed.Skipped)
	require.Len(t, listed.Locks, 1)
	assert.Equal(t, lk.Token(), listed.Locks[0].Token)

	for _, tc := range []struct {
		kill     int
		answered string
	}{{1, "1 of 3 nodes answered, 2 needed"}, {0, "0 of 3 nodes answered, 2 needed"}} {
		srvs[tc.kill].Kill()
		for _, args := range [][]string{{"locks"}, {"locks", "--json"}, {"inspect", "batch"}} {
			o := bin.run(t, ctx, nil, append(flags, args...)...)
			assert.Equal(t, 1, o.code, "%q", args)
			assert.Empty(t, o.stdout, "%q: no listing, not an empty one", args)
			assert.Contains(t, o.stderr, "redfence: cannot reach enough Redlock nodes", "%q", args)
			assert.Contains(t, o.stderr, tc.answered, "%q", args)
		}
	}
}

// A plain URL to a Cluster node, or to a replica, is refused with the fix
// to make, before anything is read through it.
func testRefusesClusterNodeAndReplica(t *testing.T, bin binary) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl := redistest.RedisCluster(t, 3)
	node := cl.Masters[0].Addr()
	o := bin.run(t, ctx, nil, "--redis", "redis://"+node, "locks")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "redfence: --redis "+node+" is a node of a Redis Cluster: add ?cluster=true to its URL (redis://"+node+"?cluster=true)")
	assert.Empty(t, o.stdout)

	master := redistest.StartRedis(t)
	replica := redistest.StartRedis(t, redistest.WithRedisArgs("--replicaof", "127.0.0.1", strconv.Itoa(master.Port())))
	for _, args := range [][]string{{"locks"}, {"inspect", "k"}, {"release", "k", "--force", "--reason", "r", "--token", "7"}} {
		o := bin.run(t, ctx, nil, append([]string{"--redis", "redis://" + replica.Addr()}, args...)...)
		assert.Equal(t, 2, o.code, "%q", args)
		assert.Contains(t, o.stderr, "redfence: --redis "+replica.Addr()+" is a replica of "+master.Addr()+": give the master's address", "%q", args)
	}
}

// prompted reads r until the confirmation prompt and returns all it read.
func prompted(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	var b strings.Builder
	for !strings.HasSuffix(b.String(), "? [y/N] ") {
		c, err := r.ReadByte()
		require.NoError(t, err, "read so far:\n%s", b.String())
		b.WriteByte(c)
	}
	return b.String()
}

// Without --token, release shows the holder it is about to end and asks;
// when another took the key in the meantime, it ends nobody. The token
// that inspect prints is what release takes.
func testReleaseAsks(t *testing.T, bin binary) {
	c, srv := redistest.Redis(t)
	url := "redis://" + srv.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := newLocker(t, c, holderInfo).Lock(ctx, "op:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	held := func(want *mutex.Lock) {
		t.Helper()
		assert.NoError(t, want.Context().Err(), "the holder lost its lock")
		in, err := operator(t, newLocker(t, c, mutex.OwnerInfo{})).Inspect(ctx, "op:1")
		require.NoError(t, err)
		assert.Equal(t, want.Token(), in.Token)
		assert.Empty(t, in.Forced)
	}

	cmd := bin.command(ctx, nil, "--redis", url, "release", "op:1", "--force", "--reason", "stuck")
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	shown := prompted(t, bufio.NewReader(stdout))
	assert.Contains(t, shown, "about to end the holder of \"op:1\":\n")
	assert.Regexp(t, `(?m)^  holder\s+`+regexp.QuoteMeta(printed(holderInfo))+`$`, shown)
	assert.Regexp(t, `(?m)^  token\s+`+strconv.FormatInt(first.Token(), 10)+`$`, shown)
	assert.Regexp(t, `(?m)^  held for\s+\d`, shown)

	// The holder shown releases, and another takes the key, before the
	// operator answers.
	require.NoError(t, first.Release(ctx))
	second, err := newLocker(t, c, waiterInfo).Lock(ctx, "op:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	_, err = io.WriteString(stdin, "y\n")
	require.NoError(t, err)
	require.Error(t, cmd.Wait())
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Contains(t, stderr.String(), fmt.Sprintf("is held under token %d, not %d", second.Token(), first.Token()))
	held(second)

	for answer, words := range map[string]string{"n\n": "not confirmed: nothing was changed", "": "not confirmed: nothing was changed"} {
		o := bin.runInput(t, ctx, answer, "--redis", url, "release", "op:1", "--force", "--reason", "stuck")
		assert.Equal(t, 1, o.code, "answer %q", answer)
		assert.Contains(t, o.stderr, words)
		held(second)
	}

	words := bin.ok(t, ctx, nil, "--redis", url, "inspect", "op:1")
	line := regexp.MustCompile(`(?m)^release\s+(redfence release .*)$`).FindStringSubmatch(words)
	require.NotNil(t, line, words)
	assert.Equal(t, fmt.Sprintf("redfence release --token %d --force --reason REASON -- 'op:1'", second.Token()), line[1])
	out := bin.ok(t, ctx, nil, "--redis", url, "release", "--token", strconv.FormatInt(second.Token(), 10), "--force", "--reason", "drill", "--", "op:1")
	assert.Contains(t, out, "fence not raised: the holder's writes through a fence still pass")
	select {
	case <-second.Context().Done():
		assert.ErrorIs(t, context.Cause(second.Context()), mutex.ErrLockLost)
	case <-ctx.Done():
		t.Fatal("the holder named by its token was not ended")
	}
}

// runInput is run with input on the command's stdin.
func (b binary) runInput(t *testing.T, ctx context.Context, input string, args ...string) outcome {
	t.Helper()
	cmd := b.command(ctx, nil, args...)
	cmd.Stdin = strings.NewReader(input)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	o := outcome{stdout: stdout.String(), stderr: stderr.String()}
	if err != nil {
		o.code = cmd.ProcessState.ExitCode()
	}
	return o
}

// locks --limit and watch stop at their limit and say so; a listing of
// many pages gives each page the whole --timeout.
func testLimits(t *testing.T, bin binary) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newLocker(t, c, holderInfo)
	for i := range 5 {
		_, err := l.Lock(ctx, "job:"+strconv.Itoa(i), mutex.WithTTL(time.Minute))
		require.NoError(t, err)
	}
	url := "redis://" + srv.Addr()
	out := bin.ok(t, ctx, nil, "--redis", url, "locks", "--limit", "2")
	assert.Len(t, regexp.MustCompile(`(?m)^job:\d\s+held\s`).FindAllString(out, -1), 2, out)
	assert.Contains(t, out, "(2 locks shown: the listing stopped at --limit; more may match)\n")
	var listed listingSchema
	require.NoError(t, json.Unmarshal([]byte(bin.ok(t, ctx, nil, "--redis", url, "locks", "--json", "--limit", "2")), &listed))
	assert.Len(t, listed.Locks, 2)
	assert.True(t, listed.Truncated)
	assert.False(t, listed.Complete)

	t.Run("a limit limits the reads", func(t *testing.T) {
		many := newLocker(t, c, holderInfo)
		for i := range 3000 {
			_, err := many.TryLock(ctx, "many:"+strconv.Itoa(i), mutex.WithTTL(time.Minute), mutex.WithAutoRenew(false))
			require.NoError(t, err)
		}
		reads := func() int64 {
			stats, err := c.InfoMap(ctx, "commandstats").Result()
			require.NoError(t, err)
			calls := int64(0)
			for _, name := range []string{"cmdstat_evalsha_ro", "cmdstat_evalsha"} {
				if f, ok := stats["Commandstats"][name]; ok {
					n, err := strconv.ParseInt(strings.TrimPrefix(strings.Split(f, ",")[0], "calls="), 10, 64)
					require.NoError(t, err)
					calls += n
				}
			}
			return calls
		}
		before := reads()
		out := bin.ok(t, ctx, nil, "--redis", url, "locks", "--limit", "5", "many:*")
		assert.Len(t, regexp.MustCompile(`(?m)^many:\d+\s+held\s`).FindAllString(out, -1), 5, out)
		assert.Less(t, reads()-before, int64(100), "a listing cut at 5 read about 5 locks, not 3,000")
	})

	t.Run("pages have their own deadline", func(t *testing.T) {
		// 30,000 other keys take about 30 SCANs: three pages, each about
		// 11 round trips of 100 ms through the proxy.
		pipe := c.Pipeline()
		for i := range 30000 {
			pipe.Set(ctx, "filler:"+strconv.Itoa(i), "x", time.Minute)
		}
		_, err := pipe.Exec(ctx)
		require.NoError(t, err)
		p := testutil.Proxy(t, srv.Addr())
		p.SetLatency(50 * time.Millisecond)
		o := bin.run(t, ctx, nil, "--redis", "redis://"+p.Addr(), "--timeout", "2s", "locks", "job:*")
		require.Equal(t, 0, o.code, o.stderr)
		assert.Len(t, regexp.MustCompile(`(?m)^job:\d\s+held\s`).FindAllString(o.stdout, -1), 5)
		require.Greater(t, o.took, 2*time.Second, "the whole listing outlasts --timeout, or this shows nothing")
	})
}

// A hung server: Ctrl-C ends any command at once, and a release whose
// outcome is unknown says so.
func testHungServer(t *testing.T, bin binary) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{{"locks"}, {"inspect", "k"}, {"release", "k", "--force", "--reason", "r", "--token", "7"}} {
		t.Run(args[0], func(t *testing.T) {
			addr, accepted := testutil.HungServer(t)
			interrupt(t, bin.command(ctx, nil, append([]string{"--redis", "redis://" + addr, "--timeout", "30s"}, args...)...),
				func() { <-accepted }, "redfence: interrupted\n")
		})
	}

	t.Run("release interrupted while the server holds it", func(t *testing.T) {
		// The release's script waits on the server: the interrupted
		// command does not wait for it.
		c, srv := redistest.Redis(t)
		lk, err := newLocker(t, c, holderInfo).Lock(ctx, "op:3", mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err())
		t.Cleanup(func() { _ = c.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
		cmd := bin.command(ctx, nil, "--redis", "redis://"+srv.Addr(), "--timeout", "30s", "release", "op:3", "--force", "--reason", "r", "--token", strconv.FormatInt(lk.Token(), 10))
		interrupt(t, cmd, func() {
			waitFor(t, ctx, "the release waits on the server", func() bool {
				clients, err := c.ClientList(ctx).Result()
				require.NoError(t, err)
				return regexp.MustCompile(`(?m) flags=b .* cmd=eval`).MatchString(clients)
			})
		}, "redfence: interrupted: the release was sent, and its outcome is unknown; see redfence inspect -- 'op:3'\n")
	})

	t.Run("release outcome unknown", func(t *testing.T) {
		c, srv := redistest.Redis(t)
		lk, err := newLocker(t, c, holderInfo).Lock(ctx, "op:2", mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		// Reads are answered, writes held: the release is sent and unanswered.
		require.NoError(t, c.Do(ctx, "CLIENT", "PAUSE", 60000, "WRITE").Err())
		t.Cleanup(func() { _ = c.Do(context.Background(), "CLIENT", "UNPAUSE").Err() })
		words := bin.ok(t, ctx, nil, "--redis", "redis://"+srv.Addr(), "inspect", "op:2")
		assert.Regexp(t, `(?m)^state\s+held$`, words, "inspect reads during a write pause")
		o := bin.run(t, ctx, nil, "--redis", "redis://"+srv.Addr(), "--timeout", "1s", "release", "op:2", "--force", "--reason", "r", "--token", strconv.FormatInt(lk.Token(), 10))
		assert.Equal(t, 1, o.code)
		assert.Contains(t, o.stderr, "redfence: the release's outcome is unknown, the holder may keep the lock: Redis at "+srv.Addr()+" did not answer: gave up after ")
		assert.Contains(t, o.stderr, "see redfence inspect -- 'op:2'")
	})
}

// interrupt starts cmd, waits until waiting says it waits on the server,
// sends it SIGINT, and checks that it ends at once, with status 1 and
// stderr as want.
func interrupt(t *testing.T, cmd *exec.Cmd, waiting func(), want string) {
	t.Helper()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	waiting()
	late := testutil.MeasureLateness(t)
	sent := time.Now()
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	_ = cmd.Wait()
	took := time.Since(sent)
	assert.Equal(t, 1, cmd.ProcessState.ExitCode())
	assert.Equal(t, want, stderr.String())
	assert.Less(t, took, late.Bound(100*time.Millisecond), "Ctrl-C took %v", took)
}

// Keys that print alike in raw form print apart; a key that is not UTF-8
// keeps its bytes in JSON's key_hex, and --key-hex names it again.
func testBinaryKeys(t *testing.T, bin binary) {
	c, srv := redistest.Redis(t)
	url := "redis://" + srv.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l := newLocker(t, c, holderInfo)
	tokens := map[string]int64{}
	for _, key := range []string{"tab\tthere", `tab\there`, "bin\x00\xff\xfe", `"quoted"`} {
		lk, err := l.Lock(ctx, key, mutex.WithTTL(time.Minute))
		require.NoError(t, err)
		tokens[key] = lk.Token()
	}
	out := bin.ok(t, ctx, nil, "--redis", url, "locks")
	for _, row := range []string{`"tab\tthere"`, `tab\there`, `"bin\x00\xff\xfe"`, `"\"quoted\""`} {
		assert.Regexp(t, `(?m)^`+regexp.QuoteMeta(row)+`\s+held\s`, out)
	}
	var listed listingSchema
	require.NoError(t, json.Unmarshal([]byte(bin.ok(t, ctx, nil, "--redis", url, "locks", "--json")), &listed))
	require.Len(t, listed.Locks, len(tokens))
	for _, j := range listed.Locks {
		key := j.Key
		if j.KeyHex != nil {
			b, err := hex.DecodeString(*j.KeyHex)
			require.NoError(t, err)
			key = string(b)
		}
		want, ok := tokens[key]
		require.True(t, ok, "%q (key_hex %v) is not a key locked", j.Key, j.KeyHex)
		assert.Equal(t, want, j.Token)
		assert.Equal(t, j.KeyHex != nil, key == "bin\x00\xff\xfe", "key_hex exactly where key is not UTF-8")

		var in inspectSchema
		require.NoError(t, json.Unmarshal([]byte(bin.ok(t, ctx, nil, "--redis", url, "inspect", "--json", "--key-hex", hex.EncodeToString([]byte(key)))), &in))
		assert.Equal(t, "held", in.State, "%q", key)
		assert.Equal(t, want, in.Token, "%q", key)
	}
}

// A server that will not say what it is (an ACL without INFO) is used as
// given, with a warning.
func testProbeRefused(t *testing.T, bin binary) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, c.Do(ctx, "ACL", "SETUSER", "ops", "on", ">pw", "~*", "+@all", "-info").Err())
	_, err := newLocker(t, c, holderInfo).Lock(ctx, "acct:5", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	o := bin.run(t, ctx, nil, "--redis", "redis://ops:pw@"+srv.Addr(), "locks")
	assert.Equal(t, 0, o.code, o.stderr)
	assert.Regexp(t, `(?m)^acct:5\s+held\s`, o.stdout)
	assert.Contains(t, o.stderr, "redfence: warning: Redis at "+srv.Addr()+" would not say whether it is a replica or a Cluster node")
	assert.NotContains(t, o.stderr, "pw")
}

// inspect of a free key names a held key that differs by an adapter's
// prefix.
func testInspectHintsPrefixes(t *testing.T, bin binary) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := newLocker(t, c, holderInfo).Lock(ctx, "asynq:account:99", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	words := bin.ok(t, ctx, nil, "--redis", "redis://"+srv.Addr(), "inspect", "account:99")
	assert.Regexp(t, `(?m)^state\s+free: nobody holds it$`, words)
	assert.Contains(t, words, "\nnote: asynq:account:99 is held: asynqlock puts \"asynq:\" before the keys it locks; see redfence inspect -- 'asynq:account:99'\n")
	words = bin.ok(t, ctx, nil, "--redis", "redis://"+srv.Addr(), "inspect", "account:98")
	assert.NotContains(t, words, "note:")
}
