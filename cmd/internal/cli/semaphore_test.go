package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// inspect shows a semaphore's limit and holders (owner, lease left, token)
// after the lock of the same name, and nothing of a name without one.
func TestInspectShowsSemaphoreHolders(t *testing.T) {
	c, srv := redistest.Redis(t)
	l := redistest.Locker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "exporter"}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := mutex.NewSemaphore(l, "tenant:7", 3, mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	var tokens []int64
	for range 2 {
		p, err := s.Acquire(ctx)
		require.NoError(t, err)
		tokens = append(tokens, p.Token())
	}
	inspect := func(key string) string {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"--redis", "redis://" + srv.Addr(), "inspect", key}, noEnv, nil, &stdout, &stderr)
		require.Zero(t, code, "stderr: %s", stderr.String())
		return stdout.String()
	}
	out := inspect("tenant:7")
	assert.Contains(t, out, "semaphore: limit 3, 2 permits held")
	for _, tok := range tokens {
		assert.Contains(t, out, fmt.Sprint(tok))
	}
	assert.Contains(t, out, "exporter")
	assert.Regexp(t, `  [0-9.]+s `, out, "the lease left")
	assert.NotContains(t, inspect("tenant:8"), "semaphore")
}

// inspect --json has the semaphore's limit and its holders by lease end,
// each with owner, owner_info (host and pid alone for a Locker without
// WithOwnerInfo), lease_ms within its TTL and token; a key without a
// semaphore writes the fields it wrote before semaphores were shown, and
// no "semaphore".
func TestInspectJSONShowsSemaphore(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	named := redistest.Locker(t, c, mutex.WithOwnerInfo(holderInfo))
	bare := redistest.Locker(t, c)
	acquire := func(l *mutex.Locker, ttl time.Duration) *mutex.Permit {
		s, err := mutex.NewSemaphore(l, "tenant:7", 3, mutex.WithTTL(ttl))
		require.NoError(t, err)
		p, err := s.Acquire(ctx)
		require.NoError(t, err)
		return p
	}
	// The later token has the earlier lease end: the holders' order is the
	// leases', not the tokens'.
	long := acquire(bare, 2*time.Minute)
	short := acquire(named, time.Minute)
	require.Greater(t, short.Token(), long.Token())
	lk, err := named.Lock(ctx, "report:1", mutex.WithTTL(time.Minute))
	require.NoError(t, err)

	inspect := func(key string) map[string]json.RawMessage {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"--redis", "redis://" + srv.Addr(), "inspect", "--json", key}, noEnv, nil, &stdout, &stderr)
		require.Zero(t, code, "stderr: %s", stderr.String())
		var doc map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
		return doc
	}
	doc := inspect("tenant:7")
	require.Contains(t, slices.Collect(maps.Keys(doc)), "semaphore")
	var sem semaphoreSchema
	require.NoError(t, json.Unmarshal(doc["semaphore"], &sem))
	assert.Equal(t, 3, sem.Limit)
	require.Len(t, sem.Holders, 2)
	host, _ := os.Hostname()
	first, second := sem.Holders[0], sem.Holders[1]
	assert.Equal(t, short.Token(), first.Token)
	assert.Equal(t, &ownerSchema{Service: holderInfo.Service, Host: host, PID: os.Getpid(), Label: holderInfo.Label}, first.OwnerInfo)
	assert.Regexp(t, `^[0-9a-f]{32}@`, first.Owner)
	assert.Equal(t, long.Token(), second.Token)
	assert.Equal(t, &ownerSchema{Host: host, PID: os.Getpid()}, second.OwnerInfo, "a Locker without WithOwnerInfo: the defaults")
	assert.NotEmpty(t, second.Owner)
	assert.NotEqual(t, first.Owner, second.Owner)
	for i, ttl := range []time.Duration{time.Minute, 2 * time.Minute} {
		h := sem.Holders[i]
		assert.Greater(t, h.LeaseMs, 0.0, "holder %d", i)
		assert.LessOrEqual(t, h.LeaseMs, float64(ttl.Milliseconds()), "holder %d", i)
	}

	// The fields a lock's inspection wrote before semaphores were shown,
	// and held_as: no semaphore's.
	plain := inspect("report:1")
	assert.ElementsMatch(t, []string{
		"schema", "key", "redis_key", "state", "token", "owner", "owner_info", "count", "acquired_at",
		"renewed_at", "held_ms", "lease_ms", "waited", "waiters", "server_time", "forced_releases", "held_as",
	}, slices.Collect(maps.Keys(plain)))
	assert.JSONEq(t, `["lock"]`, string(plain["held_as"]))
	var token int64
	require.NoError(t, json.Unmarshal(plain["token"], &token))
	assert.Equal(t, lk.Token(), token)
	assert.NotContains(t, slices.Collect(maps.Keys(inspect("tenant:8"))), "semaphore")

	require.NoError(t, short.Release(ctx))
	require.NoError(t, long.Release(ctx))
	require.NoError(t, lk.Release(ctx))
}

// Redlock keeps no semaphores: inspect says nothing of one, in words or in
// JSON, rather than that there is none.
func TestInspectRedlockClaimsNoSemaphore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clients, srvs := redistest.RedisN(t, 3)
	l, err := redistest.NewRedlock(clients)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, l.Close()) })
	_, err = mutex.NewSemaphore(l, "batch", 2)
	require.ErrorIs(t, err, errors.ErrUnsupported, "the premise: Redlock has no semaphores")
	lk, err := l.Lock(ctx, "batch", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	var flags []string
	for _, s := range srvs {
		flags = append(flags, "--redis", "redis://"+s.Addr())
	}
	inspect := func(args ...string) string {
		var stdout, stderr bytes.Buffer
		code := run(ctx, append(flags, append([]string{"inspect"}, args...)...), noEnv, nil, &stdout, &stderr)
		require.Zero(t, code, "stderr: %s", stderr.String())
		return stdout.String()
	}
	assert.NotContains(t, inspect("batch"), "semaphore")
	assert.NotContains(t, inspect("batch"), "read-write", "Redlock keeps no read-write locks either")
	var doc map[string]json.RawMessage
	require.NoError(t, json.Unmarshal([]byte(inspect("--json", "batch")), &doc))
	assert.Contains(t, doc, "nodes")
	assert.NotContains(t, slices.Collect(maps.Keys(doc)), "semaphore")
	assert.NotContains(t, slices.Collect(maps.Keys(doc)), "rwlock")
	require.NoError(t, lk.Release(ctx))
}
