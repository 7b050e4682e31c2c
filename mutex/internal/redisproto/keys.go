package redisproto

import (
	"crypto/sha1"
	"encoding/hex"
	"strings"
)

// LockKey is the Redis key of a user key under prefix: the user key inside
// a hash tag, so the lock (which also holds the fencing counter) and its
// release channel share one Cluster slot whatever braces the user key
// contains. A user key whose braces would end the tag early or empty is
// tagged by its hash.
func LockKey(prefix, key string) string {
	if strings.ContainsAny(key, "{}") {
		return prefix + "{" + sha1Hex(key) + "}" + key
	}
	return prefix + "{" + key + "}"
}

// KeyOf reads back the user key of a lock key named by LockKey under
// prefix; ok is false for any other key under the prefix (queues, audit
// streams, other data).
func KeyOf(prefix, name string) (key string, ok bool) {
	rest, ok := strings.CutPrefix(name, prefix+"{")
	if !ok {
		return "", false
	}
	tag, tail, ok := strings.Cut(rest, "}")
	if !ok {
		return "", false
	}
	if tail == "" {
		return tag, tag != ""
	}
	if strings.ContainsAny(tail, "{}") && sha1Hex(tail) == tag {
		return tail, true
	}
	return "", false
}

// ChannelOf is lockKey's release channel (same hash slot).
func ChannelOf(lockKey string) string { return lockKey + ":released" }

// QueueOf is the key of the queue of Lockers waiting for lockKey (single
// deployment only): a sorted set by first failed attempt, so that a release
// through Redis reserves the lock for the Locker that has waited longest.
func QueueOf(lockKey string) string { return lockKey + ":q" }

// AuditOf is the key of lockKey's audit stream of forced releases (same
// hash slot).
func AuditOf(lockKey string) string { return lockKey + ":audit" }

// TermsOf is the key of lockKey's term journal (package election): a
// capped stream of the terms of the election held on lockKey (same hash
// slot).
func TermsOf(lockKey string) string { return lockKey + ":terms" }

func sha1Hex(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
