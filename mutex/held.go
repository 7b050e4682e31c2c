package mutex

import (
	"cmp"
	"slices"
	"strings"

	"github.com/redfence/redfence/internal/hostlink"
)

// Package mutex/admin reads what a Locker holds through hostlink: these
// accessors are wired once, when the package is initialised, and are
// what admin.Held is made of.
func init() {
	hostlink.Held = func(l any) []hostlink.Hold { return l.(*Locker).holds() }
	hostlink.Forced = func(l any, key string, token int64, reason string) {
		l.(*Locker).tel.forced(key, token, reason)
	}
	hostlink.ID = func(l any) string { return l.(*Locker).id }
}

// holds lists the locks, the semaphores' permits and the read-write locks'
// holds this Locker holds, by key, making no round trip (admin.Held).
func (l *Locker) holds() []hostlink.Hold {
	if l == nil || l.renew == nil {
		return nil
	}
	l.renew.mu.Lock()
	locks := make([]*Lock, 0, len(l.renew.locks))
	for lk := range l.renew.locks {
		locks = append(locks, lk)
	}
	l.renew.mu.Unlock()
	now := l.now()
	out := make([]hostlink.Hold, 0, len(locks))
	qkeys := make([]string, 0, len(locks))
	for _, lk := range locks {
		lk.mu.Lock()
		if lk.done {
			lk.mu.Unlock()
			continue
		}
		h := hostlink.Hold{
			Key: lk.key, Token: lk.token, Acquired: lk.acquired, HeldFor: now.Sub(lk.acquired),
			Lease: max(lk.deadline.Sub(now), 0), TTL: lk.ttl, Count: lk.count,
			AutoRenew: lk.autoRenew, Renewals: lk.renewals, LastRenewal: lk.renewRTT,
			Kind: holdKindName(lk),
		}
		lk.mu.Unlock()
		out = append(out, h)
		if lk.kind != nil {
			qkeys = append(qkeys, lk.kind.queueKey())
		} else {
			qkeys = append(qkeys, lk.key)
		}
	}
	l.mu.Lock()
	for i := range out {
		if q := l.queues[qkeys[i]]; q != nil {
			out[i].Waiters = len(q.waiters)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b hostlink.Hold) int {
		if c := strings.Compare(a.Key, b.Key); c != 0 {
			return c
		}
		return cmp.Compare(a.Token, b.Token)
	})
	return out
}

// holdKindName names lk's family for operators: "lock", "permit", or the
// read-write hold's "read" or "write".
func holdKindName(lk *Lock) string {
	switch {
	case familyOf(lk) == familyPermit:
		return "permit"
	case rwMode(lk) != "":
		return rwMode(lk)
	}
	return "lock"
}
