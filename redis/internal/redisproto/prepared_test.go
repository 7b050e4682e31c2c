package redisproto_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

func TestMain(m *testing.M) { redistest.Main(m) }

// recorder is a go-redis hook that keeps the arguments of every command.
type recorder struct {
	mu   sync.Mutex
	args [][]any
}

func (r *recorder) DialHook(next redis.DialHook) redis.DialHook { return next }
func (r *recorder) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		r.mu.Lock()
		r.args = append(r.args, cmd.Args())
		r.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (r *recorder) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (r *recorder) take() [][]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.args
	r.args = nil
	return a
}

// A Prepared call sends what Script.Run sends, hooks see the same
// arguments, and a server without the script gets EVAL, as with Run.
func TestPreparedIsScriptRun(t *testing.T) {
	ctx := context.Background()
	c, _ := redistest.Redis(t)
	rec := &recorder{}
	c.AddHook(rec)
	keys := []string{"redfence:{p}", "redfence:{p}:q"}

	for _, loaded := range []bool{false, true} {
		if !loaded {
			require.NoError(t, c.ScriptFlush(ctx).Err())
		}
		require.NoError(t, c.Del(ctx, keys...).Err())
		rec.take()
		viaRun, err := redisproto.AcquireScript.Run(ctx, c, keys[:1], "owner", int64(10000)).Result()
		require.NoError(t, err)
		runArgs := rec.take()
		require.NoError(t, c.Del(ctx, keys...).Err())
		if !loaded {
			require.NoError(t, c.ScriptFlush(ctx).Err())
		}

		rec.take()
		cmd := redisproto.AcquireCall.Args(nil, 1)
		cmd = append(cmd, keys[0], "owner", int64(10000))
		viaPrepared, err := redisproto.AcquireCall.Run(ctx, c, cmd).Result()
		require.NoError(t, err)
		preparedArgs := rec.take()

		assert.Equal(t, runArgs, preparedArgs, "loaded %v", loaded)
		assert.Len(t, preparedArgs, map[bool]int{false: 2, true: 1}[loaded], "EVALSHA, then EVAL on NOSCRIPT")
		assert.IsType(t, viaRun, viaPrepared)
	}
}

// wrapped is a client of a type not go-redis's own, whose EvalSha may do
// more than send the command.
type wrapped struct {
	*redis.Client
	evalsha *atomic.Int64
}

func (w wrapped) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	w.evalsha.Add(1)
	return w.Client.EvalSha(ctx, sha, keys, args...)
}

func TestPreparedOnAWrapperIsScriptRun(t *testing.T) {
	ctx := context.Background()
	c, _ := redistest.Redis(t)
	var n atomic.Int64
	w := wrapped{c, &n}
	require.NoError(t, redisproto.ReleaseScript.Load(ctx, c).Err())

	cmd := redisproto.ReleaseCall.Args(nil, 2)
	cmd = append(cmd, "redfence:{w}", "redfence:{w}:q", "1 1 1+10000 0 owner", "1")
	left, err := redisproto.ReleaseCall.Run(ctx, w, cmd).Int64()
	require.NoError(t, err)
	assert.Equal(t, int64(-1), left, "not held")
	assert.Equal(t, int64(1), n.Load(), "the wrapper's EvalSha")
}
