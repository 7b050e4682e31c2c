package apicheck

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/election"
	"github.com/redfence/redfence/etcddriver"
	"github.com/redfence/redfence/fenced"
	"github.com/redfence/redfence/fenced/fence"
	"github.com/redfence/redfence/fenced/sqlfence"
	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/internal/testutil"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/admin"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/pgdriver"
	"github.com/redfence/redfence/redis/asynqlock"
	"github.com/redfence/redfence/redis/httplock"
	"github.com/redfence/redfence/redis/idempotency"
	"github.com/redfence/redfence/redis/redisdriver"
	"github.com/redfence/redfence/redis/redisfence"
	"github.com/redfence/redfence/redis/redlockdriver"
	"github.com/redfence/redfence/runner"
)

// TestEveryPackagesBadInputIsErrInvalid is the one table of bad input,
// package by package: every error matches mutex.ErrInvalid, and every
// package's ErrInvalid is that value. Nothing here reaches a server: the
// client points at an address that refuses connections.
func TestEveryPackagesBadInputIsErrInvalid(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: testutil.RefusedAddr(t), MaxRetries: -1})
	t.Cleanup(func() { _ = rdb.Close() })
	l := redistest.Locker(t, rdb)
	ctx := context.Background()
	scope := func(*http.Request) string { return "tenant" }
	// A pool that never connects: New sends nothing.
	pool, err := pgxpool.New(ctx, "postgres://postgres@"+testutil.RefusedAddr(t)+"/none")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	CheckInvalid(t, []Case{
		{"mutex: nil backend", mutex.ErrInvalid, func() error { _, err := mutex.New(nil); return err }},
		{"mutex: bad option", mutex.ErrInvalid, func() error {
			d, _ := redisdriver.New(rdb)
			_, err := mutex.New(d, mutex.WithClockDrift(-1, 0))
			return err
		}},
		{"mutex: empty key", mutex.ErrInvalid, func() error { _, err := l.TryLock(ctx, ""); return err }},
		{"mutex: bad TTL", mutex.ErrInvalid, func() error { _, err := l.TryLock(ctx, "k", mutex.WithTTL(-1)); return err }},
		{"mutex: semaphore of 0", mutex.ErrInvalid, func() error { _, err := mutex.NewSemaphore(l, "s", 0); return err }},
		{"mutex/backend", backend.ErrInvalid, func() error { return backend.ErrInvalid }},
		{"pgdriver: nil db", pgdriver.ErrInvalid, func() error { _, err := pgdriver.New(nil); return err }},
		{"pgdriver: empty schema", pgdriver.ErrInvalid, func() error { _, err := pgdriver.New(pool, pgdriver.WithSchema("")); return err }},
		{"etcddriver: nil client", etcddriver.ErrInvalid, func() error { _, err := etcddriver.New(nil); return err }},
		{"etcddriver: negative token base", etcddriver.ErrInvalid, func() error {
			_, err := etcddriver.New(nil, etcddriver.WithTokenBase(-1))
			return err
		}},
		{"redisdriver: nil client", nil, func() error { _, err := redisdriver.New(nil); return err }},
		{"redisdriver: brace prefix", nil, func() error { _, err := redisdriver.New(rdb, redisdriver.WithPrefix("a{")); return err }},
		{"redlockdriver: two nodes", nil, func() error {
			_, err := redlockdriver.New([]redis.UniversalClient{rdb, rdb})
			return err
		}},
		{"redlockdriver: bad option", nil, func() error {
			_, err := redlockdriver.New(nil, redlockdriver.WithStoreTimeout(0))
			return err
		}},
		{"admin: nil Locker", nil, func() error { _, err := admin.New(nil); return err }},
		{"admin: empty key", nil, func() error {
			a, _ := admin.New(l)
			_, err := a.Inspect(ctx, "")
			return err
		}},
		{"election: empty name", election.ErrInvalid, func() error { _, err := election.New(l, ""); return err }},
		{"election: bad TTL", election.ErrInvalid, func() error {
			_, err := election.New(l, "e", election.WithTTL(-time.Second))
			return err
		}},
		{"runner: nil Locker", runner.ErrInvalid, func() error { _, err := runner.New(nil); return err }},
		{"fenced: nil db", fenced.ErrInvalid, func() error { _, err := fenced.New(nil); return err }},
		{"fenced/fence", fence.ErrInvalid, func() error { return fence.ErrInvalid }},
		{"sqlfence: nil db", sqlfence.ErrInvalid, func() error { _, err := sqlfence.New(nil, sqlfence.Postgres); return err }},
		{"redisfence: nil client", redisfence.ErrInvalid, func() error { _, err := redisfence.New(nil); return err }},
		{"httplock: nil Locker", httplock.ErrInvalid, func() error { _, err := httplock.New(nil); return err }},
		{"httplock: bad TTL", httplock.ErrInvalid, func() error { _, err := httplock.New(l, httplock.WithTTL(-1)); return err }},
		{"asynqlock: nil Locker", asynqlock.ErrInvalid, func() error { _, err := asynqlock.New(nil); return err }},
		{"asynqlock: bad TTL", asynqlock.ErrInvalid, func() error { _, err := asynqlock.New(l, asynqlock.WithTTL(-1)); return err }},
		{"idempotency: nil scope", idempotency.ErrInvalid, func() error { _, err := idempotency.New(l, nil); return err }},
		{"idempotency: bad TTL", idempotency.ErrInvalid, func() error {
			_, err := idempotency.New(l, scope, idempotency.WithTTL(-1))
			return err
		}},
	})
}

func TestMain(m *testing.M) { redistest.Main(m) }
