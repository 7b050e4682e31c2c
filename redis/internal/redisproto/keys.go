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

// LockKeys is LockKey and QueueOf of it, made as one string: the lock key
// is the queue key without its suffix. One allocation instead of two on
// every acquisition, which needs both (the queue for its handle).
func LockKeys(prefix, key string) (lockKey, queueKey string) {
	if strings.ContainsAny(key, "{}") {
		lockKey = LockKey(prefix, key)
		return lockKey, QueueOf(lockKey)
	}
	queueKey = prefix + "{" + key + "}" + queueSuffix
	return queueKey[:len(queueKey)-len(queueSuffix)], queueKey
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
func QueueOf(lockKey string) string { return lockKey + queueSuffix }

const queueSuffix = ":q"

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

// SemaphoreKeys are the keys of the semaphore of lockKey's name (same hash
// slot as the lock of that name): the holders, a sorted set of holder id by
// the end of its lease in µs of the server's clock; the tokens, a hash of
// holder id to token; and the meta hash, with the limit (n) and the last
// token issued (c). See lua/sem_acquire.lua.
func SemaphoreKeys(lockKey string) []string {
	return []string{lockKey + ":sem:z", lockKey + ":sem:t", lockKey + ":sem:m"}
}

// SemaphoreChannelOf is the channel where the semaphore of lockKey's name
// says a permit may have come back (same hash slot).
func SemaphoreChannelOf(lockKey string) string { return lockKey + ":sem:released" }

// RWKeys are the keys of the read-write lock of lockKey's name (same hash
// slot as the lock of that name): the readers, a sorted set of reader id by
// the end of its lease in µs of the server's clock; the readers' tokens, a
// hash; the meta hash, with the writer (w), the end of its lease (we) and
// the last token issued (c); and the waiting writers, a sorted set by the
// end of their mark. See lua/rw_acquire.lua.
func RWKeys(lockKey string) []string {
	return []string{lockKey + ":rw:r", lockKey + ":rw:t", lockKey + ":rw:m", lockKey + ":rw:q"}
}

// RWChannelOf is the channel where the read-write lock of lockKey's name
// says an attempt may now succeed (same hash slot).
func RWChannelOf(lockKey string) string { return lockKey + ":rw:released" }
