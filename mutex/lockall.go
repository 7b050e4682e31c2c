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
// duplicates included: a set much larger than a transaction's is a bug.
const MaxKeys = 64

// LockAll acquires every key of keys as one lock, waiting until it holds
// them all or ctx ends, and returns them as Locks: each key's own lock and
// fencing token, one context, one Release. Keys are deduplicated and taken
// in one order every Locker of the backend shares (the backend's group of
// the key, then the key), so LockAll calls never deadlock; a group's keys
// go in one round trip, all or none, where the backend is a
// backend.Batcher, and one at a time, as Lock takes them, otherwise.
//
// All or nothing: when ctx ends, the Locker closes, or an attempt fails for
// good, LockAll releases the keys it took before it returns Lock's error.
// Options apply to every key; keys held through ctx are re-entered, as Lock
// re-enters them (re-entering some keys while waiting for others is, as
// with nested Lock calls, the caller's order to keep). No keys, more than
// MaxKeys, or a bad key returns ErrInvalid before anything is sent.
func (l *Locker) LockAll(ctx context.Context, keys []string, opts ...LockOption) (*Locks, error) {
	return l.lockAll(ctx, "redfence.LockAll", keys, true, opts)
}

// TryLockAll makes one attempt at every key, in LockAll's order, without
// waiting: the Locks, or, having released what it took, ErrNotAcquired
// naming a key another owner holds, or an error matching ErrUnavailable.
func (l *Locker) TryLockAll(ctx context.Context, keys []string, opts ...LockOption) (*Locks, error) {
	return l.lockAll(ctx, "redfence.TryLockAll", keys, false, opts)
}

// DoAll is Do for several keys: LockAll, fn, Release, fn's context ending
// when ctx ends or any key is lost.
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
		if uerr := ls.Release(uctx); err == nil && !errors.Is(uerr, ErrNotHeld) {
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
			s[i].group = l.drv.ba.Group(k)
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
