package redistest

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/testutil"
)

// Calls is a go-redis hook that counts every dial, command and pipeline.
type Calls struct{ n atomic.Int64 }

// N is the count so far.
func (h *Calls) N() int64 { return h.n.Load() }

func (h *Calls) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.n.Add(1)
		return next(ctx, network, addr)
	}
}

func (h *Calls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *Calls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// DeadClient is a Redis client for an address nothing listens on, failing
// fast, whose every dial and command is counted: bad input must be turned
// away before any.
func DeadClient(t testing.TB) (*redis.Client, *Calls) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: testutil.RefusedAddr(t), MaxRetries: -1, DialerRetries: 1, DialTimeout: 100 * time.Millisecond})
	h := &Calls{}
	c.AddHook(h)
	t.Cleanup(func() { _ = c.Close() })
	return c, h
}
