package etcddriver

import "time"

// Watching is the number of b's watches running.
func Watching(b *Driver) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.running
}

// Streams is the number of b's watches whose stream etcd created.
func Streams(b *Driver) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.streams
}

// SetClock makes b read the time from now; before any call.
func SetClock(b *Driver, now func() time.Time) { b.now = now }

// Pooled is the number of leases b keeps for later locks.
func Pooled(b *Driver) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pooled
}

// LeaseTTL is the TTL of the leases a Driver grants for locks of ttl,
// before the server's minimum.
func LeaseTTL(ttl time.Duration) time.Duration { return time.Duration(leaseSeconds(ttl)) * time.Second }

// Compactions is the number of times one of b's watches found the revision
// it resumed from compacted, and read the key afresh.
func Compactions(b *Driver) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.compacted
}

// ClaimKey, GapKey and RecordKey are where b keeps a slot claim, its gap
// and a run record of key.
func ClaimKey(key string) string  { return key + claimSuffix }
func GapKey(key string) string    { return key + gateSuffix }
func RecordKey(key string) string { return key + recordSuffix }
