package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
)

// inspect shows a read-write lock's writer or readers (owner, lease left,
// token), its waiting writers and last write's token, after the lock of
// the same name; nothing of a name without one.
func TestInspectShowsRWMutexHolds(t *testing.T) {
	c, srv := redistest.Redis(t)
	l := redistest.Locker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "pricer"}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rw, err := mutex.NewRWMutex(l, "prices", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	inspect := func(key string) string {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"--redis", "redis://" + srv.Addr(), "inspect", key}, noEnv, nil, &stdout, &stderr)
		require.Zero(t, code, "stderr: %s", stderr.String())
		return stdout.String()
	}
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	out := inspect("prices")
	assert.Contains(t, out, "read-write lock: held for writing, 0 writers waiting, last write's token "+fmt.Sprint(w.Token()))
	assert.Regexp(t, `  write +pricer on .* +[0-9.]+s +`+fmt.Sprint(w.Token()), out)

	require.NoError(t, w.Downgrade(ctx))
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	out = inspect("prices")
	assert.Contains(t, out, "read-write lock: 2 readers")
	assert.Regexp(t, `(?s)  read .*  read `, out)
	require.NoError(t, r.Release(ctx))
	require.NoError(t, w.Release(ctx))
	assert.NotContains(t, inspect("other"), "read-write")
}

// inspect --json has the read-write lock of the key under rwlock: the
// writer or the readers with owner, owner info, lease and token, writers
// waiting, the last write's token; absent for a name without one.
func TestInspectJSONShowsRWLock(t *testing.T) {
	c, srv := redistest.Redis(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := redistest.Locker(t, c, mutex.WithOwnerInfo(mutex.OwnerInfo{Service: "pricer"}))
	rw, err := mutex.NewRWMutex(l, "prices", mutex.WithTTL(time.Minute))
	require.NoError(t, err)
	type permit struct {
		Owner     string       `json:"owner"`
		OwnerInfo *ownerSchema `json:"owner_info"`
		LeaseMs   float64      `json:"lease_ms"`
		Token     int64        `json:"token"`
	}
	var doc struct {
		RWLock *struct {
			Writer    *permit  `json:"writer"`
			Readers   []permit `json:"readers"`
			Waiting   int      `json:"writers_waiting"`
			LastWrite int64    `json:"last_write_token"`
		} `json:"rwlock"`
	}
	inspect := func(key string) {
		var stdout, stderr bytes.Buffer
		code := run(ctx, []string{"--redis", "redis://" + srv.Addr(), "inspect", "--json", key}, noEnv, nil, &stdout, &stderr)
		require.Zero(t, code, "stderr: %s", stderr.String())
		doc.RWLock = nil
		require.NoError(t, json.Unmarshal(stdout.Bytes(), &doc))
	}
	w, err := rw.Lock(ctx)
	require.NoError(t, err)
	inspect("prices")
	require.NotNil(t, doc.RWLock)
	require.NotNil(t, doc.RWLock.Writer)
	assert.Equal(t, w.Token(), doc.RWLock.Writer.Token)
	assert.Equal(t, w.Token(), doc.RWLock.LastWrite)
	assert.Equal(t, "pricer", doc.RWLock.Writer.OwnerInfo.Service)
	assert.Greater(t, doc.RWLock.Writer.LeaseMs, 0.0)
	assert.LessOrEqual(t, doc.RWLock.Writer.LeaseMs, float64(time.Minute.Milliseconds()))
	assert.Empty(t, doc.RWLock.Readers)

	require.NoError(t, w.Downgrade(ctx))
	inspect("prices")
	require.NotNil(t, doc.RWLock)
	assert.Nil(t, doc.RWLock.Writer)
	require.Len(t, doc.RWLock.Readers, 1)
	assert.Equal(t, w.Token(), doc.RWLock.Readers[0].Token)
	require.NoError(t, w.Release(ctx))
	inspect("other")
	assert.Nil(t, doc.RWLock, "a name without a read-write lock has no rwlock")
}
