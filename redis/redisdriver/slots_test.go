package redisdriver_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/redfence/redfence/internal/redistest"
	"github.com/redfence/redfence/mutex"
	"github.com/redfence/redfence/mutex/backend"
)

// A slot is claimed once, never after a higher one, in numeric order
// whatever the sign; a claimer's retry finds its own claim; the key is
// used as given, without the driver's prefix.
func TestClaimSlotOrder(t *testing.T) {
	c, _ := redistest.Redis(t)
	d := newDriver(t, c)
	ctx := context.Background()
	claim := func(key string, slot int64, who string) bool {
		t.Helper()
		ok, err := d.ClaimSlot(ctx, backend.SlotClaim{Key: key, Slot: slot, Claimer: who, TTL: time.Minute})
		require.NoError(t, err)
		return ok
	}
	assert.True(t, claim("k", 5, "a"))
	assert.False(t, claim("k", 5, "b"), "a slot is claimed once")
	assert.True(t, claim("k", 5, "a"), "a retry of the claimer finds its claim")
	assert.False(t, claim("k", 4, "b"), "never a lower slot after a higher one")
	assert.True(t, claim("k", 6, "b"))
	assert.False(t, claim("k", 5, "a"), "a claimer's slot passed is no longer its")
	for i, slot := range []int64{-1 << 40, -3, -1, 0, 9, 10, 255, 256, 1 << 40} {
		assert.True(t, claim("n", slot, "a"), "slot %d after a lower one", slot)
		if i > 0 {
			assert.False(t, claim("n", slot-1, "b"), "slot %d after %d", slot-1, slot)
		}
	}
	ttl, err := c.PTTL(ctx, "k").Result()
	require.NoError(t, err)
	assert.Greater(t, ttl, 50*time.Second, "the claim key, as named, lasts its TTL")
}

// A claim with a gap refuses the next slots until the gap has passed on the
// server's clock; a retry of the claimer still finds its claim.
func TestClaimSlotGap(t *testing.T) {
	c, _ := redistest.Redis(t)
	d := newDriver(t, c)
	ctx := context.Background()
	claim := func(slot int64, who string) bool {
		t.Helper()
		ok, err := d.ClaimSlot(ctx, backend.SlotClaim{Key: "g", Slot: slot, Claimer: who, TTL: time.Minute, Gap: time.Hour})
		require.NoError(t, err)
		return ok
	}
	assert.True(t, claim(1, "a"))
	assert.False(t, claim(2, "b"), "the gap is closed")
	assert.True(t, claim(1, "a"), "a retry of the claimer finds its claim")
	// The gap is counted from the claim's time as the server stored it:
	// moved an hour back, the gap has passed.
	v, err := c.Get(ctx, "g").Result()
	require.NoError(t, err)
	parts := strings.SplitN(v, ":", 3)
	require.Len(t, parts, 3, "slot:at:claimer, got %q", v)
	at, err := strconv.ParseInt(parts[1], 10, 64)
	require.NoError(t, err)
	back := fmt.Sprintf("%s:%d:%s", parts[0], at-time.Hour.Milliseconds(), parts[2])
	require.NoError(t, c.Set(ctx, "g", back, time.Minute).Err())
	assert.True(t, claim(2, "b"), "the gap has passed")
}

// Records round-trip, and an absent one is not found; the server's clock
// is read.
func TestRecordsAndServerTime(t *testing.T) {
	c, _ := redistest.Redis(t)
	d := newDriver(t, c)
	ctx := context.Background()
	_, found, err := d.GetRecord(ctx, "r")
	require.NoError(t, err)
	assert.False(t, found)
	require.NoError(t, d.PutRecord(ctx, "r", []byte("v1"), time.Minute))
	v, found, err := d.GetRecord(ctx, "r")
	require.NoError(t, err)
	assert.True(t, found)
	assert.Equal(t, "v1", string(v))

	before := time.Now()
	now, err := d.ServerTime(ctx)
	require.NoError(t, err)
	// The private server runs on this host's clock: its TIME lies between
	// the call's ends, to the millisecond the server counts in.
	assert.False(t, now.Before(before.Truncate(time.Second)), "%v before %v", now, before)
	assert.False(t, now.After(time.Now().Add(time.Second)), "%v after the call", now)
}

// Bad input to the slot calls is refused before any request.
func TestSlotsBadInput(t *testing.T) {
	c, calls := redistest.DeadClient(t)
	d := newDriver(t, c)
	ctx := context.Background()
	ok := backend.SlotClaim{Key: "k", Slot: 1, Claimer: "a", TTL: time.Minute}
	for name, sc := range map[string]func(*backend.SlotClaim){
		"empty key":      func(c *backend.SlotClaim) { c.Key = "" },
		"empty claimer":  func(c *backend.SlotClaim) { c.Claimer = "" },
		"zero TTL":       func(c *backend.SlotClaim) { c.TTL = 0 },
		"negative gap":   func(c *backend.SlotClaim) { c.Gap = -1 },
		"slot past 2^53": func(c *backend.SlotClaim) { c.Slot = 1<<53 + 1 },
	} {
		claim := ok
		sc(&claim)
		_, err := d.ClaimSlot(ctx, claim)
		assert.ErrorIs(t, err, mutex.ErrInvalid, name)
	}
	assert.ErrorIs(t, d.PutRecord(ctx, "", nil, time.Minute), mutex.ErrInvalid)
	assert.ErrorIs(t, d.PutRecord(ctx, "r", nil, 0), mutex.ErrInvalid)
	_, _, err := d.GetRecord(ctx, "")
	assert.ErrorIs(t, err, mutex.ErrInvalid)
	assert.Zero(t, calls.N(), "bad input reached Redis")
}
