package etcdstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/cmd/internal/cli"
	etcddriver "github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/internal/etcdtest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// outcome is what one in-process run of the command did.
type outcome struct {
	stdout, stderr string
	code           int
}

// run is the command as main builds it (Redis and etcd), in process, with
// env alone as its environment and no input.
func run(ctx context.Context, env map[string]string, args ...string) outcome {
	var stdout, stderr bytes.Buffer
	code := cli.Run(ctx, args, func(k string) string { return env[k] }, nil, &stdout, &stderr, cli.Redis, Etcd)
	return outcome{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// ok runs the command with --etcd endpoint and requires status 0 and a
// quiet stderr.
func ok(t *testing.T, ctx context.Context, endpoint string, args ...string) string {
	t.Helper()
	o := run(ctx, nil, append([]string{"--etcd", endpoint}, args...)...)
	require.Equal(t, 0, o.code, "redfence %q: %s", args, o.stderr)
	require.Empty(t, o.stderr, "redfence %q", args)
	return o.stdout
}

var holderInfo = mutex.OwnerInfo{Service: "billing", Label: "v1"}

// shown is info as the command prints it: with this process's host and pid.
func shown(info mutex.OwnerInfo) string {
	info.Host, _ = os.Hostname()
	info.PID = os.Getpid()
	return info.String()
}

// etcdLocker is an application's Locker on s (the command's default
// prefix), closed at t's clean-up.
func etcdLocker(t *testing.T, s *etcdtest.Cluster, opts ...etcddriver.Option) *mutex.Locker {
	t.Helper()
	d, err := etcddriver.New(s.Client(t), opts...)
	require.NoError(t, err)
	l, err := mutex.New(d, mutex.WithOwnerInfo(holderInfo))
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) }) // and d's
	return l
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// An operator lists, inspects and force-releases an etcd lock: the table
// and the JSON show the holder and its token (the key's revision); inspect
// prints the release line that names the holder by it; the release shows
// the floor, ends the holder's lock context with ErrLockLost and is in the
// audit inspect shows; the next holder's token exceeds the floor, and the
// old release line leaves that holder alone.
func TestLocksInspectRelease(t *testing.T) {
	s := etcdtest.Start(t)
	ctx := testCtx(t)
	l := etcdLocker(t, s)
	lk, err := l.Lock(ctx, "invoice-42", mutex.WithTTL(3*time.Second))
	require.NoError(t, err)
	tok := strconv.FormatInt(lk.Token(), 10)

	out := ok(t, ctx, s.Members[0].Endpoint(), "locks")
	assert.Regexp(t, `(?m)^KEY\s+STATE\s+TOKEN\s+OWNER\s+HELD FOR\s+LEASE LEFT\s+COUNT\s+WAITERS$`, out)
	assert.Regexp(t, `(?m)^invoice-42\s+held\s+`+tok+`\s+`+regexp.QuoteMeta(shown(holderInfo))+`\s`, out)

	checkListedJSON(t, ok(t, ctx, s.Members[0].Endpoint(), "locks", "--json"), lk)

	out = ok(t, ctx, s.Members[0].Endpoint(), "inspect", "invoice-42")
	for _, want := range []string{
		`(?m)^etcd key\s+redfence:invoice-42$`,
		`(?m)^state\s+held$`,
		`(?m)^token\s+` + tok + `$`,
		`(?m)^count\s+1 \(re-entries in etcd, plus one\)$`,
		`(?m)^release\s+redfence release --token ` + tok + ` --force --reason REASON -- 'invoice-42'$`,
		`(?m)^waiters: etcd keeps no queue`,
		`(?m)^forced releases: none$`,
	} {
		assert.Regexp(t, want, out)
	}

	out = ok(t, ctx, s.Members[0].Endpoint(), "release", "--token", tok, "--force", "--reason", "stuck after deploy", "--by", "ops", "--", "invoice-42")
	floor := strconv.FormatInt(lk.Token()+1, 10)
	assert.Contains(t, out, `released "invoice-42" by force`)
	assert.Regexp(t, `(?m)^\s+token\s+`+tok+`: the holder's; its next renewal fails`, out)
	assert.Regexp(t, `(?m)^\s+floor\s+`+floor+`: every later token of "invoice-42" exceeds it$`, out)
	assert.Contains(t, out, "fence not raised")

	select {
	case <-lk.Context().Done():
		assert.ErrorIs(t, context.Cause(lk.Context()), mutex.ErrLockLost)
	case <-ctx.Done():
		t.Fatal("the holder's lock context did not end after the forced release")
	}
	out = ok(t, ctx, s.Members[0].Endpoint(), "inspect", "invoice-42")
	assert.Regexp(t, `(?m)^state\s+free: nobody holds it$`, out)
	assert.Regexp(t, `(?m)^forced releases: 1, latest first$`, out)
	assert.Regexp(t, `(?m)^\s+\S+\s+ops\s+stuck after deploy\s+`+tok+` → `+floor+`\s+`+regexp.QuoteMeta(shown(holderInfo))+`$`, out)

	next, err := l.Lock(ctx, "invoice-42", mutex.WithTTL(3*time.Second))
	require.NoError(t, err)
	assert.Greater(t, next.Token(), lk.Token()+1, "a later token exceeds the floor")
	o := run(ctx, nil, "--etcd", s.Members[0].Endpoint(), "release", "--token", tok, "--force", "--reason", "again", "--", "invoice-42")
	assert.Equal(t, 1, o.code, o.stdout)
	assert.Contains(t, o.stderr, tok)
	assert.NoError(t, next.Context().Err(), "the old release line leaves the new holder alone")
	require.NoError(t, next.Release(ctx))
}

// checkListedJSON checks that locks --json printed lk alone, whole.
func checkListedJSON(t *testing.T, out string, lk *mutex.Lock) {
	t.Helper()
	var listed struct {
		Complete bool `json:"complete"`
		Locks    []struct {
			Key     string `json:"key"`
			Name    string `json:"redis_key"` // the store's key, whatever the store
			Token   int64  `json:"token"`
			NoQueue string `json:"no_queue"`
		} `json:"locks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &listed))
	assert.True(t, listed.Complete)
	require.Len(t, listed.Locks, 1)
	assert.Equal(t, lk.Key(), listed.Locks[0].Key)
	assert.Equal(t, "redfence:"+lk.Key(), listed.Locks[0].Name)
	assert.Equal(t, lk.Token(), listed.Locks[0].Token)
	assert.Contains(t, listed.Locks[0].NoQueue, "etcd keeps no queue", "an empty waiters list says nothing over etcd")
}

// Tokens with etcddriver.WithTokenBase are shown, and matched, with
// --etcd-token-base; without it the command sees the bare revision and
// a release by the shown token finds another holder.
func TestTokenBase(t *testing.T) {
	s := etcdtest.Start(t)
	ctx := testCtx(t)
	const base = 1_800_000_000_000_000
	lk, err := etcdLocker(t, s, etcddriver.WithTokenBase(base)).Lock(ctx, "job:1", mutex.WithTTL(3*time.Second))
	require.NoError(t, err)
	tok := strconv.FormatInt(lk.Token(), 10)

	based := []string{"--etcd-token-base", strconv.Itoa(base)}
	assert.Regexp(t, `(?m)^token\s+`+tok+`$`, ok(t, ctx, s.Members[0].Endpoint(), append(based, "inspect", "job:1")...))
	assert.Regexp(t, `(?m)^token\s+`+strconv.FormatInt(lk.Token()-base, 10)+`$`, ok(t, ctx, s.Members[0].Endpoint(), "inspect", "job:1"))

	o := run(ctx, nil, "--etcd", s.Members[0].Endpoint(), "release", "--token", tok, "--force", "--reason", "r", "job:1")
	assert.Equal(t, 1, o.code, "without the base the token names no holder: %s", o.stdout)
	assert.NoError(t, lk.Context().Err())
	out := ok(t, ctx, s.Members[0].Endpoint(), append(based, "release", "--token", tok, "--force", "--reason", "r", "job:1")...)
	assert.Regexp(t, `(?m)^\s+floor\s+`+strconv.FormatInt(lk.Token()+1, 10)+`:`, out)
}

// ETCD_ENDPOINTS names the cluster when no flag does; a flag of the other
// store wins over it, and flags of both stores are refused.
func TestChoosesTheStore(t *testing.T) {
	s := etcdtest.Start(t)
	ctx := testCtx(t)
	_, err := etcdLocker(t, s).Lock(ctx, "k", mutex.WithTTL(3*time.Second))
	require.NoError(t, err)

	o := run(ctx, map[string]string{"ETCD_ENDPOINTS": s.Members[0].Endpoint()}, "locks")
	require.Equal(t, 0, o.code, o.stderr)
	assert.Regexp(t, `(?m)^k\s+held\s`, o.stdout)

	refused := testutil.RefusedAddr(t)
	o = run(ctx, map[string]string{"ETCD_ENDPOINTS": s.Members[0].Endpoint()}, "--redis", "redis://"+refused, "locks")
	assert.Equal(t, 1, o.code)
	assert.Contains(t, o.stderr, "cannot reach Redis at "+refused)

	o = run(ctx, nil, "--redis", "redis://"+refused, "--etcd", s.Members[0].Endpoint(), "locks")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "redfence: flags name servers of two stores")
	o = run(ctx, map[string]string{"ETCD_ENDPOINTS": s.Members[0].Endpoint(), "REDIS_URL": "redis://" + refused}, "locks")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "redfence: the environment names servers of two stores")
}

// A member that cannot be reached is said so at once, in words; with
// another member up it is a warning and the command goes on.
func TestUnreachableMember(t *testing.T) {
	ctx := testCtx(t)
	refused := testutil.RefusedAddr(t)
	start := time.Now()
	o := run(ctx, nil, "--etcd", "http://"+refused, "locks")
	assert.Equal(t, 1, o.code)
	assert.Equal(t, "redfence: cannot reach etcd at "+refused+": connection refused\n", o.stderr)
	assert.Less(t, time.Since(start), 5*time.Second, "a refused connection is not waited for")

	s := etcdtest.Start(t)
	o = run(ctx, nil, "--etcd", s.Members[0].Endpoint()+",http://"+refused, "locks")
	assert.Equal(t, 0, o.code, o.stderr)
	assert.Equal(t, "no locks are held\n", o.stdout)
	assert.Contains(t, o.stderr, "redfence: warning: cannot reach etcd at "+refused+": connection refused: the command goes on through "+strings.TrimPrefix(s.Members[0].Endpoint(), "http://")+"\n")
}

// Bad URLs are usage errors that name the fix, and never echo a password.
func TestBadURLs(t *testing.T) {
	ctx := testCtx(t)
	for _, tc := range []struct{ url, want string }{
		{"ftp://127.0.0.1:2379", "the scheme must be http:// or https://"},
		{"http://127.0.0.1", "the URL needs a port"},
		{"http://root:s3cret@127.0.0.1:2379", "does not log in to etcd"},
		{"http://127.0.0.1:2379/v3/kv", "has no path, query or fragment"},
		{"http://%zz:2379", "not a member URL"},
	} {
		o := run(ctx, nil, "--etcd", tc.url, "locks")
		assert.Equal(t, 2, o.code, tc.url)
		assert.Contains(t, o.stderr, tc.want, tc.url)
		assert.NotContains(t, o.stderr, "s3cret", tc.url)
	}
	o := run(ctx, nil, "--etcd-token-base", "-1", "locks")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "not a token base")
	o = run(ctx, nil, "--etcd", ",", "locks")
	assert.Equal(t, 2, o.code)
	assert.Contains(t, o.stderr, "empty URL")
}

// The usage shows both stores' flags and URL forms.
func TestUsage(t *testing.T) {
	o := run(context.Background(), nil, "help")
	require.Equal(t, 0, o.code, o.stderr)
	for _, want := range []string{"--etcd URL", "--etcd-token-base N", "--redis URL", "etcd URLs (--etcd, else $ETCD_ENDPOINTS", "Redis URLs (--redis, else $REDIS_URL)"} {
		assert.Contains(t, o.stdout, want)
	}
}

// etcd keeps no semaphores: inspect says nothing of one, in words or in
// JSON, rather than that there is none.
func TestInspectClaimsNoSemaphore(t *testing.T) {
	s := etcdtest.Start(t)
	ctx := testCtx(t)
	l := etcdLocker(t, s)
	_, err := mutex.NewSemaphore(l, "invoice-43", 2)
	require.ErrorIs(t, err, errors.ErrUnsupported, "the premise: etcd has no semaphores")
	lk, err := l.Lock(ctx, "invoice-43", mutex.WithTTL(time.Minute))
	require.NoError(t, err)

	text := ok(t, ctx, s.Members[0].Endpoint(), "inspect", "invoice-43")
	assert.NotContains(t, text, "semaphore")
	assert.NotContains(t, text, "read-write", "etcd keeps no read-write locks either")
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(ok(t, ctx, s.Members[0].Endpoint(), "inspect", "--json", "invoice-43")), &doc))
	assert.Contains(t, doc, "token")
	assert.NotContains(t, doc, "semaphore")
	assert.NotContains(t, doc, "rwlock")
	require.NoError(t, lk.Release(ctx))
}
