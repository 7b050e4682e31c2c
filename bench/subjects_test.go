package bench

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	rsredis "github.com/go-redsync/redsync/v4/redis"
	rsgoredis "github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// counter counts round trips (a command, a pipeline or a pgx statement)
// made through the clients it is hooked into.
type counter struct{ n atomic.Int64 }

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// TraceQueryStart counts a pgx statement as one round trip (pgx.QueryTracer).
func (c *counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// servers are the redis-servers of one benchmark run: one for the
// single-node subjects, five for Redlock and redsync (the first three make
// the 3-node setups).
type servers struct {
	one  *redistest.RedisServer
	five []*redistest.RedisServer
	rtt  *counter
}

func startServers(b *testing.B) *servers {
	_, one := redistest.Redis(b)
	_, five := redistest.RedisN(b, 5)
	return &servers{one: one, five: five, rtt: &counter{}}
}

// all is every server of the run.
func (s *servers) all() []*redistest.RedisServer {
	return append([]*redistest.RedisServer{s.one}, s.five...)
}

// client is a plain go-redis client (the defaults every peer gets) with the
// round-trip counter.
func (s *servers) client(b *testing.B, srv *redistest.RedisServer) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), PoolSize: 64})
	c.AddHook(s.rtt)
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func (s *servers) clients(b *testing.B, n int) []redis.UniversalClient {
	out := make([]redis.UniversalClient, n)
	for i := range out {
		out[i] = s.client(b, s.five[i])
	}
	return out
}

// A subject is one lock implementation. lock blocks until acquired (or
// fails); the returned func releases.
type subject struct {
	name string
	lock func(ctx context.Context, key string) (func() error, error)
}

var errGaveUp = errors.New("gave up")

// newLocker is redfence over one deployment (redisdriver on c, with opts:
// mutex and redisdriver options). The caller closes it.
func newLocker(b testing.TB, c redis.UniversalClient, opts ...any) *mutex.Locker {
	b.Helper()
	l, err := redistest.NewLocker(c, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

// newRedlock is redfence over Redlock's masters (redlockdriver on
// clients, with opts: mutex and redlockdriver options). The caller closes
// it.
func newRedlock(b testing.TB, clients []redis.UniversalClient, opts ...any) *mutex.Locker {
	b.Helper()
	l, err := redistest.NewRedlock(clients, opts...)
	if err != nil {
		b.Fatal(err)
	}
	return l
}

func redfenceSubject(b *testing.B, name string, l *mutex.Locker) subject {
	b.Cleanup(func() { _ = l.Close() })
	return subject{name, func(ctx context.Context, key string) (func() error, error) {
		lk, err := l.Lock(ctx, key)
		if err != nil {
			return nil, err
		}
		return func() error { return lk.Release(ctx) }, nil
	}}
}

func redislockSubject(c *redis.Client) subject {
	rl := redislock.New(c)
	opt := &redislock.Options{RetryStrategy: redislock.LinearBackoff(time.Millisecond)}
	return subject{"redislock", func(ctx context.Context, key string) (func() error, error) {
		lk, err := rl.Obtain(ctx, key, 10*time.Second, opt)
		if err != nil {
			return nil, err
		}
		return func() error { return lk.Release(ctx) }, nil
	}}
}

func redsyncSubject(name string, clients ...redis.UniversalClient) subject {
	pools := make([]rsredis.Pool, len(clients))
	for i, c := range clients {
		pools[i] = rsgoredis.NewPool(c)
	}
	rs := redsync.New(pools...)
	return subject{name, func(ctx context.Context, key string) (func() error, error) {
		m := rs.NewMutex(key, redsync.WithExpiry(10*time.Second))
		if err := m.LockContext(ctx); err != nil {
			return nil, fmt.Errorf("%w: %w", errGaveUp, err)
		}
		return func() error { _, err := m.UnlockContext(ctx); return err }, nil
	}}
}

// floorSubject is the raw floor: SET NX PX, then a compare-and-delete
// EVALSHA, nothing else. It does not wait: a taken key is an error (only used
// uncontended).
func floorSubject(c *redis.Client) subject {
	return subject{"floor", func(ctx context.Context, key string) (func() error, error) {
		tok := token()
		ok, err := c.SetNX(ctx, key, tok, 10*time.Second).Result()
		if err != nil || !ok {
			return nil, fmt.Errorf("floor acquire: %v %v", ok, err)
		}
		return func() error { return floorRelease.Run(ctx, c, []string{key}, tok).Err() }, nil
	}}
}
