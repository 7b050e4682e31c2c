package redisproto

import (
	"strconv"
	"time"
)

// DefaultFenceTTL is how long a lock key's fencing counter outlives its
// last use unless told otherwise; acquire.lua knows it too
// (DefaultKeyTTLMs), so that the common call need not send it.
const DefaultFenceTTL = time.Hour

// DefaultPrefix is the drivers' default key prefix (WithPrefix).
const DefaultPrefix = "redfence:"

// DefaultKeyTTLMs is the key TTL acquire.lua uses when the call leaves it
// out: DefaultFenceTTL in ms.
const DefaultKeyTTLMs = "3600000"

// KeyTTL is how long a lock key lives past its last use: the fencing
// counter's life, and never shorter than the lease.
type KeyTTL struct {
	fence   time.Duration
	fenceMs string // For's answer for leases up to half the fence TTL, formatted once
}

// NewKeyTTL is the KeyTTL of a fence TTL.
func NewKeyTTL(fence time.Duration) KeyTTL {
	return KeyTTL{fence: fence, fenceMs: strconv.FormatInt(fence.Milliseconds(), 10)}
}

// For is the key TTL in ms, as the scripts take it, for a lease.
func (k KeyTTL) For(lease time.Duration) string {
	if lease <= k.fence/2 { // no lease*2: it must not overflow
		return k.fenceMs
	}
	return strconv.FormatInt((lease * 2).Milliseconds(), 10)
}
