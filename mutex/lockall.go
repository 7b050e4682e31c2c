package mutex

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"
)

// MaxKeys bounds the keys of one LockAll, TryLockAll or DoAll call,
// duplicates included: every key is a lock to take, renew and release, and
// a set much larger than a transaction's resources is almost always a bug.
const MaxKeys = 64

// LockAll acquires every key of keys as one lock, waiting until it holds
// them all or ctx ends, and returns them as Locks: each key's own lock and
// fencing token, one context, one Unlock.
//
// Keys are deduplicated and taken in one order that every Locker of the
// backend shares: by the backend's group of the key (backend.Batcher: the
// Cluster hash slot; one group for all keys of a standalone or Sentinel
// deployment), then by key. A call waits for a key only while it holds keys
// before it in that order, never one after, so LockAll calls wait for one
// another without a deadlock, whatever order each was given its keys in.
// The keys of one group are tried together in one round trip, all or none
// (the Redis driver runs one script per hash slot). When that finds one
// held, or the backend has no Batcher (Redlock, etcd), the keys are taken
// one at a time in the order, each as Lock takes it: the local queue,
// release notifications, hand-off, the backend's fair queue. Goroutines of
// this Locker already waiting for a key go first, as they do for Lock.
//
// All or nothing: when ctx ends, the Locker closes, or an attempt fails for
// good before every key is held, LockAll releases the keys it took before
// it returns (a key whose grant met Close is released by Close, which
// waits for that), and returns Lock's error: errors.Join(ErrNotAcquired,
// ctx.Err()) with ErrUnavailable when the server failed, or ErrClosed. An
// attempt cut short is cleaned up as Lock's is, on a context of its own.
//
// Options apply to every key, and each key is held as Lock holds it (its
// own lease, renewed in the Locker's batches while the call waits for the
// keys after it). Keys held through ctx (the context of a Lock
// or Locks of this Locker) are re-entered, count+1 with the same token, as
// Lock re-enters them; WithOwner re-enters in the backend. Re-entering some
// keys while waiting for others holds keys out of the order: as with nested
// Lock calls, that order is the caller's to keep. No keys, more than
// MaxKeys, or an empty or too long key returns an error matching ErrInvalid
// before anything is sent.
func (l *Locker) LockAll(ctx context.Context, keys []string, opts ...LockOption) (*Locks, error) {
	return l.lockAll(ctx, "redfence.LockAll", keys, true, opts)
}

// TryLockAll makes one attempt at every key of keys, in LockAll's order and
// groups, without waiting: it returns the Locks, or, having released what
// it took, ErrNotAcquired when another owner holds a key (the error names
// it; Redlock: a *QuorumError) or an error matching ErrUnavailable that
// wraps the server's. Keys this Locker's Lock calls wait for count as held,
// as they do for TryLock. It re-enters, and refuses bad input, like
// LockAll.
func (l *Locker) TryLockAll(ctx context.Context, keys []string, opts ...LockOption) (*Locks, error) {
	return l.lockAll(ctx, "redfence.TryLockAll", keys, false, opts)
}

// DoAll runs fn while holding every key of keys: LockAll, fn, Unlock. fn's
// context (ls.Join(ctx)) ends when ctx ends or any key is lost;
// context.Cause says which. It returns fn's error; an Unlock error only
// when fn succeeded. The Unlock runs on a context of its own, so it happens
// even when ctx has ended. If fn panics the keys are released and the
// panic goes on.
func (l *Locker) DoAll(ctx context.Context, keys []string, fn func(ctx context.Context, ls *Locks) error, opts ...LockOption) (err error) {
	if fn == nil {
		return invalid("nil function")
	}
	ls, err := l.LockAll(ctx, keys, opts...)
	if err != nil {
		return err
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if uerr := ls.Unlock(uctx); err == nil && !errors.Is(uerr, ErrNotHeld) {
			err = uerr
		}
	}()
	fctx, cancel := ls.Join(ctx)
	defer cancel()
	return fn(fctx, ls)
}

func (l *Locker) lockAll(ctx context.Context, spanName string, keys []string, wait bool, opts []LockOption) (*Locks, error) {
	m := &multi{l: l, caller: ctx, wait: wait, lc: newLockConfig(opts)}
	groups, err := l.checkAll(ctx, keys, &m.lc)
	if err != nil {
		return nil, err
	}
	n := 0
	for _, g := range groups {
		n += len(g)
	}
	m.start = time.Now()
	m.ctx, m.span = l.tel.startKeysSpan(ctx, spanName, n)
	for _, g := range groups {
		if err := m.takeGroup(g); err != nil {
			return nil, m.fail(err)
		}
	}
	return m.succeed(), nil
}

// checkAll refuses bad input, before anything is sent, and returns the
// keys in their groups, in order.
func (l *Locker) checkAll(ctx context.Context, keys []string, lc *lockConfig) ([][]string, error) {
	switch {
	case l == nil:
		return nil, invalid("nil Locker")
	case l.err != nil:
		return nil, l.err
	case len(keys) == 0:
		return nil, invalid("no keys")
	case len(keys) > MaxKeys:
		return nil, invalid("%d keys exceed %d", len(keys), MaxKeys)
	}
	for _, k := range keys {
		if err := l.check(ctx, k); err != nil {
			return nil, err
		}
	}
	if err := l.checkLock(lc); err != nil {
		return nil, err
	}
	return l.order(keys), nil
}

// order deduplicates keys and returns them in groups, in the order every
// Locker of the backend takes keys in: by (group, key), the group a
// function of the key alone. Without a Batcher every key is a group of its
// own, in key order.
func (l *Locker) order(keys []string) [][]string {
	type groupKey struct {
		group int
		key   string
	}
	s := make([]groupKey, len(keys))
	for i, k := range keys {
		s[i].key = k
		if l.drv.ba != nil {
			s[i].group = l.drv.ba.Group(l.name(k))
		}
	}
	slices.SortFunc(s, func(a, b groupKey) int {
		return cmp.Or(cmp.Compare(a.group, b.group), strings.Compare(a.key, b.key))
	})
	s = slices.CompactFunc(s, func(a, b groupKey) bool { return a.key == b.key })
	var groups [][]string
	for i, x := range s {
		if i == 0 || l.drv.ba == nil || x.group != s[i-1].group {
			groups = append(groups, nil)
		}
		groups[len(groups)-1] = append(groups[len(groups)-1], x.key)
	}
	return groups
}
