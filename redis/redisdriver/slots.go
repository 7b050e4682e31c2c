package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
)

// Package runner's slot claims and run records (backend.SlotClaimer) and
// the server's clock (backend.ServerClock). The keys are the runner's as it
// names them, under its own prefix, never a lock's: the Driver's prefix is
// not put on them.
var (
	_ backend.SlotClaimer = (*Driver)(nil)
	_ backend.ServerClock = (*Driver)(nil)
)

// slotClaimScript claims a slot once. The claim is one string,
// "slot:at:claimer", at the server's time of the claim in ms (TIME, allowed
// in scripts since Redis 5's effects replication), kept to GET and SET so
// that SECURITY.md's ACL covers it. A same-claimer retry of the stored slot
// is true; a slot at or below the stored one, or a claim within the gap of
// the stored one's, is refused.
//
// KEYS[1] the claim key; ARGV slot, claimer, TTL ms, gap ms.
var slotClaimScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local slot = tonumber(ARGV[1])
local cur = redis.call('GET', KEYS[1])
if cur then
  local s, at, c = string.match(cur, '^(-?%d+):(%d+):(.*)$')
  local last = tonumber(s)
  if last == slot and c == ARGV[2] then return 1 end
  if slot <= last then return 0 end
  if now < tonumber(at) + tonumber(ARGV[4]) then return 0 end
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. now .. ':' .. ARGV[2], 'PX', ARGV[3])
return 1
`)

// maxLuaSlot is the largest slot number Lua's doubles compare exactly.
const maxLuaSlot = 1 << 53

// ClaimSlot claims c.Slot of c.Key in one script, counting c.Gap on the
// server's clock. Slot numbers beyond ±2^53 are refused (Lua compares
// doubles). On error the outcome is unknown.
func (d *Driver) ClaimSlot(ctx context.Context, c backend.SlotClaim) (bool, error) {
	switch {
	case c.Key == "":
		return false, invalid("empty slot key")
	case c.Claimer == "":
		return false, invalid("empty claimer")
	case c.TTL <= 0:
		return false, invalid("TTL %v is not positive", c.TTL)
	case c.Gap < 0:
		return false, invalid("gap %v is negative", c.Gap)
	case c.Slot > maxLuaSlot || c.Slot < -maxLuaSlot:
		return false, invalid("slot %d beyond ±2^53", c.Slot)
	}
	var n int64
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		n, err = slotClaimScript.Run(ctx, d.client, []string{c.Key},
			strconv.FormatInt(c.Slot, 10), c.Claimer, max(c.TTL.Milliseconds(), 1), c.Gap.Milliseconds()).Int64()
		return err
	})
	d.reload.NoAnswer(err)
	if err != nil || pending != nil {
		return false, fmt.Errorf("redisdriver: claim slot %d of %q: %w", c.Slot, c.Key, err)
	}
	return n == 1, nil
}

// PutRecord stores value under key with a TTL of ttl.
func (d *Driver) PutRecord(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	switch {
	case key == "":
		return invalid("empty record key")
	case ttl <= 0:
		return invalid("TTL %v is not positive", ttl)
	}
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		return d.client.Set(ctx, key, value, ttl).Err()
	})
	d.reload.NoAnswer(err)
	if err != nil || pending != nil {
		return fmt.Errorf("redisdriver: put record %q: %w", key, err)
	}
	return nil
}

// GetRecord reads what PutRecord stored under key.
func (d *Driver) GetRecord(ctx context.Context, key string) ([]byte, bool, error) {
	if key == "" {
		return nil, false, invalid("empty record key")
	}
	var b []byte
	found := true
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		b, err = d.client.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			found, err = false, nil
		}
		return err
	})
	d.reload.NoAnswer(err)
	if err != nil || pending != nil {
		return nil, false, fmt.Errorf("redisdriver: get record %q: %w", key, err)
	}
	return b, found, nil
}

// ServerTime reads the server's clock (TIME).
func (d *Driver) ServerTime(ctx context.Context) (time.Time, error) {
	var now time.Time
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		now, err = d.client.Time(ctx).Result()
		return err
	})
	d.reload.NoAnswer(err)
	if err != nil || pending != nil {
		return time.Time{}, fmt.Errorf("redisdriver: server time: %w", err)
	}
	return now, nil
}
