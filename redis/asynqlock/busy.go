package asynqlock

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/redis/redisdriver"
)

// BusyWindow is how long a task that found its key locked counts in Busy:
// longer than asynq takes to retry it (DelayedTaskCheckInterval, 1 s with
// Config, 5 s without), so a task still retrying keeps counting.
const BusyWindow = 10 * time.Second

// busyPrefix begins the Redis key of a lock key's busy record.
const busyPrefix = "redfence:asynqlock:busy:"

//go:embed lua/busy.lua
var busyLua string

var busyScript = redis.NewScript(busyLua)

// Busy returns how many tasks found key (as WithKey returns it, without
// KeyPrefix) locked by another handler within the last BusyWindow, on every
// server whose middleware shares locker's Redis: the tasks asynq is
// retrying for it, which admin's Inspect does not list as waiters (they do
// not wait; they come back). It reads the record the middleware keeps
// beside the lock, the sorted set "redfence:asynqlock:busy:asynq:<key>"
// of task ids by the server time (ms) each last found the key locked, which
// expires BusyWindow after the last. A nil ctx, a nil Locker, a Locker
// whose backend lends no Redis client (redisdriver.ClientOf: Redlock, where
// no single Redis holds the record, or etcd) or an empty key is an error
// wrapping ErrInvalid, without a round trip.
func Busy(ctx context.Context, locker *mutex.Locker, key string) (int, error) {
	var rc redis.UniversalClient
	if locker != nil {
		rc = redisdriver.ClientOf(locker.Backend())
	}
	switch {
	case ctx == nil:
		return 0, fmt.Errorf("asynqlock: %w: nil context", ErrInvalid)
	case locker == nil:
		return 0, fmt.Errorf("asynqlock: %w: nil locker", ErrInvalid)
	case rc == nil:
		return 0, fmt.Errorf("asynqlock: %w: the Locker's backend lends no Redis client (Redlock, etcd, …) to keep a busy record in", ErrInvalid)
	case key == "":
		return 0, fmt.Errorf("asynqlock: %w: empty key", ErrInvalid)
	}
	n, err := busyScript.Run(ctx, rc, []string{busyPrefix + KeyPrefix + key}, BusyWindow.Milliseconds()).Int()
	if err != nil {
		return 0, fmt.Errorf("asynqlock: busy record of %s: %w", KeyPrefix+key, err)
	}
	return n, nil
}

// recordBusy notes that the task found key locked and returns how many
// tasks did within BusyWindow. It is best effort: a failure is returned for
// the span, and changes nothing of the task's outcome. A Redlock Locker
// keeps no record (-1).
func recordBusy(ctx context.Context, c redis.UniversalClient, key string, t *asynq.Task) (int, error) {
	if c == nil {
		return -1, nil
	}
	id, ok := asynq.GetTaskID(ctx)
	if !ok { // not run by asynq's server: each attempt counts as a task
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = t.Type() + ":" + hex.EncodeToString(b[:])
	}
	ctx, cancel := context.WithTimeout(ctx, busyTimeout)
	defer cancel()
	return busyScript.Run(ctx, c, []string{busyPrefix + KeyPrefix + key}, BusyWindow.Milliseconds(), id).Int()
}

// busyTimeout bounds the record's round trip: Redis just answered the
// lock's.
const busyTimeout = time.Second
