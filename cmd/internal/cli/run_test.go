package cli

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"os"
	"os/user"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/lockview"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	asynqlock "github.com/redfence/redfence/redis/asynqlock"
	httplock "github.com/redfence/redfence/redis/httplock"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/runner"
)

// noEnv is an empty environment.
func noEnv(string) string { return "" }

// run, in process: help goes to stdout with status 0, for every command.
func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"--help"}} {
		var stdout, stderr bytes.Buffer
		assert.Equal(t, 0, run(context.Background(), args, noEnv, nil, &stdout, &stderr), "%q", args)
		assert.Empty(t, stderr.String())
		assert.Contains(t, stdout.String(), "Usage:\n  redfence [global flags] COMMAND")
		for _, c := range commands {
			assert.Contains(t, stdout.String(), "\n  "+c.name+" ", "%q lists %s", args, c.name)
		}
	}
	for _, c := range commands {
		for _, args := range [][]string{{"help", c.name}, {c.name, "-h"}} {
			var stdout, stderr bytes.Buffer
			assert.Equal(t, 0, run(context.Background(), args, noEnv, nil, &stdout, &stderr), "%q", args)
			assert.True(t, strings.HasPrefix(stdout.String(), "Usage: redfence "+c.name+" "), "%q:\n%s", args, stdout.String())
			assert.Contains(t, stdout.String(), "--timeout D")
		}
	}
	var stdout, stderr bytes.Buffer
	assert.Equal(t, 0, run(context.Background(), []string{"help", "json"}, noEnv, nil, &stdout, &stderr))
	assert.Equal(t, lockview.SchemaDoc, stdout.String(), "help json prints the schema")
	stdout.Reset()
	assert.Equal(t, 2, run(context.Background(), []string{"help", "nope"}, noEnv, nil, &stdout, &stderr))
	assert.Contains(t, stderr.String(), `unknown command "nope"`)
}

// Each URL form makes the client it names, and a bad one is refused in
// words, its password hidden.
func TestDialURL(t *testing.T) {
	for _, tc := range []struct {
		url   string
		kind  kind
		addrs []string
		check func(t *testing.T, c redis.UniversalClient)
	}{
		{"redis://127.0.0.1:7000/3", standalone, []string{"127.0.0.1:7000"}, func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.Client).Options()
			assert.Equal(t, 3, o.DB)
			assert.True(t, o.ContextTimeoutEnabled)
			assert.Nil(t, o.TLSConfig)
		}},
		{"rediss://u:p@127.0.0.1:7000", standalone, []string{"127.0.0.1:7000"}, func(t *testing.T, c redis.UniversalClient) {
			o := c.(*redis.Client).Options()
			assert.Equal(t, "u", o.Username)
			assert.Equal(t, "p", o.Password)
			assert.IsType(t, &tls.Config{}, o.TLSConfig)
		}},
		{"redis://127.0.0.1:26379?master_name=mymaster&addr=127.0.0.1:26380", sentinel, []string{"127.0.0.1:26379", "127.0.0.1:26380"}, nil},
		{"redis://127.0.0.1:7000?cluster=true", cluster, []string{"127.0.0.1:7000"}, func(t *testing.T, c redis.UniversalClient) {
			assert.True(t, c.(*redis.ClusterClient).Options().ContextTimeoutEnabled)
		}},
		{"redis://127.0.0.1:7000?addr=127.0.0.1:7001&addr=127.0.0.1:7002", cluster, []string{"127.0.0.1:7000", "127.0.0.1:7001", "127.0.0.1:7002"}, nil},
	} {
		t.Run(tc.url, func(t *testing.T) {
			s, err := dialURL(tc.url)
			require.NoError(t, err)
			defer s.client.Close()
			assert.Equal(t, tc.kind, s.kind)
			assert.Equal(t, tc.addrs, s.addrs)
			if tc.kind == sentinel {
				assert.Equal(t, "mymaster", s.master)
			}
			if tc.check != nil {
				tc.check(t, s.client)
			}
		})
	}
	for url, want := range map[string]string{
		"http://u:secret@127.0.0.1:1":                                                    "--redis http://u:xxxxx@127.0.0.1:1: the scheme must be redis:// or rediss://",
		"redis://127.0.0.1:1?cluster=maybe":                                              `--redis redis://127.0.0.1:1?cluster=maybe: cluster="maybe" is neither true nor false`,
		"redis://127.0.0.1:1?cluster=false&addr=h:2":                                     "--redis redis://127.0.0.1:1?cluster=false&addr=h:2: addr parameters name Cluster nodes: drop cluster=false",
		"redis://127.0.0.1:1?master_name=m&cluster=true":                                 "--redis redis://127.0.0.1:1?master_name=m&cluster=true: master_name (Sentinel) and cluster=true exclude each other",
		"redis://u:secret@127.0.0.1:1?no_such_option=1":                                  "--redis redis://u:xxxxx@127.0.0.1:1?no_such_option=1: redis: unexpected option: no_such_option",
		"redis://u:secret@127.0.0.1:1/x":                                                 `--redis redis://u:xxxxx@127.0.0.1:1/x: redis: invalid database number: "x"`,
		"redis://127.0.0.1:1?master_name=m&no_such_option=":                              "--redis redis://127.0.0.1:1?master_name=m&no_such_option=: redis: unexpected option: no_such_option",
		"redis://u:secret@[::1":                                                          "--redis: not a valid URL (percent-encode any / # ? @ in the password)",
		"redis://:se/cret@127.0.0.1:1":                                                   "--redis: not a valid URL (percent-encode any / # ? @ in the password)",
		"redis://127.0.0.1:1?master_name=m&password=secret&sentinel_password=secret&x=1": "--redis redis://127.0.0.1:1?master_name=m&password=xxxxx&sentinel_password=xxxxx&x=1: redis: unexpected option: sentinel_password, x",
	} {
		_, err := dialURL(url)
		require.Error(t, err, url)
		assert.Equal(t, want, err.Error())
		assert.IsType(t, &usageError{}, err)
	}
}

func TestHuman(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-time.Second:                          "0ms",
		0:                                     "0ms",
		850 * time.Millisecond:                "850ms",
		2500 * time.Millisecond:               "2.5s",
		42*time.Second + 900*time.Millisecond: "42s",
		3*time.Minute + 7*time.Second:         "3m07s",
		5*time.Hour + 2*time.Minute:           "5h02m",
		76 * time.Hour:                        "3d04h",
	} {
		assert.Equal(t, want, human(d), "%v", d)
	}
}

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		json bool
	}{
		{[]string{"k", "--json"}, []string{"k"}, true},
		{[]string{"--json", "k"}, []string{"k"}, true},
		{[]string{"a", "b"}, []string{"a", "b"}, false},
		{[]string{"--", "--json"}, []string{"--json"}, false},
		{[]string{"k", "--", "-x", "--json"}, []string{"k", "-x", "--json"}, false},
	} {
		fs := newFlagSet("t")
		j := fs.Bool("json", false, "")
		pos, err := parseInterleaved(fs, tc.args)
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, tc.pos, pos, "%q", tc.args)
		assert.Equal(t, tc.json, *j, "%q", tc.args)
	}
	_, err := parseInterleaved(newFlagSet("t"), []string{"k", "-h"})
	assert.ErrorIs(t, err, flag.ErrHelp)
}

// run, in process, over a real server: locks --json lists the lock, and
// watch draws a frame and returns 0 when its ctx ends (what SIGINT does).
// testutil.Main checks afterwards that no goroutine outlived them.
func TestRunInProcess(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk, err := newLocker(t, c, holderInfo).Lock(ctx, "job:1")
	require.NoError(t, err)
	env := func(name string) string {
		if name == "REDIS_URL" {
			return "redis://" + srv.Addr()
		}
		return ""
	}

	var stdout, stderr bytes.Buffer
	require.Equal(t, 0, run(ctx, []string{"locks", "--json"}, env, nil, &stdout, &stderr), stderr.String())
	var listed listingSchema
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &listed))
	locks := listed.Locks
	require.Len(t, locks, 1)
	assert.Equal(t, "job:1", locks[0].Key)
	assert.Equal(t, lk.Token(), locks[0].Token)

	watchCtx, stop := context.WithCancel(ctx)
	frames := &frameWriter{onWrite: func(string) { stop() }}
	stderr.Reset()
	assert.Equal(t, 0, run(watchCtx, []string{"watch"}, env, nil, frames, &stderr))
	assert.Empty(t, stderr.String())
	out := frames.String()
	assert.True(t, strings.HasPrefix(out, clearScreen+`redfence watch: locks matching "*" on Redis at `+srv.Addr()+", every 1s. "), out)
	assert.Regexp(t, `(?m)^job:1\s+held\s+`, out)

	// --free lists a freed key with its last token; --prefix looks at the
	// Lockers of another prefix.
	require.NoError(t, lk.Release(ctx))
	other := redistest.Locker(t, c, redisdriver.WithPrefix("app:"))
	olk, err := other.Lock(ctx, "job:2")
	require.NoError(t, err)
	defer olk.Release(ctx)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"locks"}, "no locks are held\n"},
		{[]string{"locks", "--free", "job:*"}, `(?m)^job:1\s+free\s+` + strconv.FormatInt(lk.Token(), 10) + `\s+-\s+-\s+-\s+-\s+0$`},
		{[]string{"--prefix", "app:", "locks"}, `(?m)^job:2\s+held\s+` + strconv.FormatInt(olk.Token(), 10) + `\s`},
		{[]string{"locks", "--prefix", "app:", "job:1"}, `no locks are held whose key matches "job:1"\n`},
	} {
		stdout.Reset()
		stderr.Reset()
		require.Equal(t, 0, run(ctx, tc.args, env, nil, &stdout, &stderr), "%q: %s", tc.args, stderr.String())
		assert.Regexp(t, tc.want, stdout.String(), "%q", tc.args)
	}
}

// A forced release is by $USER@hostname unless --by says otherwise.
func TestDefaultBy(t *testing.T) {
	host, err := os.Hostname()
	require.NoError(t, err)
	env := map[string]string{"USER": "ann", "LOGNAME": "bob"}
	assert.Equal(t, "ann@"+host, defaultBy(func(k string) string { return env[k] }))
	delete(env, "USER")
	assert.Equal(t, "bob@"+host, defaultBy(func(k string) string { return env[k] }))
	u, err := user.Current()
	require.NoError(t, err)
	assert.Equal(t, u.Username+"@"+host, defaultBy(noEnv), "the process's user, without USER and LOGNAME")
}

// frameWriter keeps what is written and calls onWrite with each write:
// watch writes a frame at once.
type frameWriter struct {
	mu      sync.Mutex
	b       strings.Builder
	onWrite func(frame string)
}

func (w *frameWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, err := w.b.Write(p)
	w.mu.Unlock()
	w.onWrite(string(p))
	return n, err
}

func (w *frameWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// watch shows a failed refresh and tries again: once Redis is back, the
// next frame shows its locks.
func TestWatchKeepsTrying(t *testing.T) {
	c, srv := redistest.Redis(t)
	srv.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watchCtx, stop := context.WithCancel(ctx)
	defer stop()
	var frames []string
	var lk *mutex.Lock
	w := &frameWriter{onWrite: func(frame string) {
		frames = append(frames, frame)
		if len(frames) == 1 {
			srv.Restart()
			var err error
			lk, err = newLocker(t, c, holderInfo).Lock(ctx, "job:1")
			require.NoError(t, err)
		}
		if strings.Contains(frame, "job:1") {
			stop()
		}
	}}
	var stderr bytes.Buffer
	require.Equal(t, 0, run(watchCtx, []string{"--redis", "redis://" + srv.Addr(), "watch", "--interval", "500ms"}, noEnv, nil, w, &stderr))
	assert.Empty(t, stderr.String())
	require.GreaterOrEqual(t, len(frames), 2)
	assert.Contains(t, frames[0], "\n\nerror: cannot reach Redis at "+srv.Addr()+": connection refused\n(trying again in 500ms)\n")
	assert.Regexp(t, `(?m)^job:1\s+held\s+`+strconv.FormatInt(lk.Token(), 10)+`\s`, frames[len(frames)-1])
	require.NoError(t, lk.Release(ctx))
}

// A bad pattern is a usage error, from mutex's own check.
func TestLocksBadPattern(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"--redis", "redis://" + testutil.RefusedAddr(t), "locks", strings.Repeat("x", mutex.MaxKeyLen+1)}, noEnv, nil, &stdout, &stderr)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr.String(), "redfence: PATTERN of 4097 bytes exceeds 4096\n")
}

// watch shows at most --limit locks a frame, and says that more may match.
func TestWatchLimit(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := newLocker(t, c, holderInfo)
	for i := range 5 {
		_, err := l.Lock(ctx, "job:"+strconv.Itoa(i), mutex.WithTTL(time.Minute))
		require.NoError(t, err)
	}
	watchCtx, stop := context.WithCancel(ctx)
	frames := &frameWriter{onWrite: func(string) { stop() }}
	var stderr bytes.Buffer
	require.Equal(t, 0, run(watchCtx, []string{"--redis", "redis://" + srv.Addr(), "watch", "--limit", "2"}, noEnv, nil, frames, &stderr), stderr.String())
	out := frames.String()
	assert.Len(t, regexp.MustCompile(`(?m)^job:\d\s+held\s`).FindAllString(out, -1), 2, out)
	assert.Contains(t, out, "(2 locks shown: the listing stopped at --limit; more may match)\n")
}

// The prefixes inspect's hint knows are the adapters' own.
func TestAdapterPrefixes(t *testing.T) {
	prefixes := map[string]string{}
	for _, a := range adapterPrefixes {
		prefixes[a.adapter] = a.prefix
	}
	assert.Equal(t, asynqlock.KeyPrefix, prefixes["asynqlock"])
	assert.Equal(t, runner.KeyPrefix, prefixes["runner"])
	assert.Equal(t, httplock.LockPrefix, prefixes["httplock"])
	assert.Len(t, prefixes, 3)
}

// A release without --token run with no input is not confirmed: nothing
// is changed, and nothing panics.
func TestReleaseWithoutInput(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lk, err := newLocker(t, c, holderInfo).Lock(ctx, "job:7", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	var stdout, stderr bytes.Buffer
	code := run(ctx, []string{"--redis", "redis://" + srv.Addr(), "release", "job:7", "--force", "--reason", "r"}, noEnv, nil, &stdout, &stderr)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr.String(), "not confirmed: nothing was changed")
	assert.NoError(t, lk.Context().Err())
}
