package etcddriver

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/mutex/backend"
)

// A lock's key is put on an etcd lease that this Driver keeps in a pool
// while no key is on it: granted when the pool has none fresh enough, put
// back when the lock is released or an attempt did not take the key. An
// uncontended Lock+Release then sends two transactions, no grant and no
// revoke.
//
// Why a lease granted before the call keeps rule 2 of the contract (the
// lease runs from no earlier than the Acquire call): etcd ends a lease its
// TTL after the leader handled the grant or the last keep-alive, which it
// did after the client sent it (and a new leader only lengthens leases). A
// lease whose grant or keep-alive was sent at fresh therefore lasts until
// fresh + TTL at least. An attempt takes a pooled lease only when that is no
// earlier than now + the attempt's TTL, now read inside Acquire, after the
// Locker read its send time: the key lasts past the Locker's deadline (its
// send time + TTL, less drift), as with a lease granted in the call. The
// lease only lasts longer than the deadline, which delays the key's release
// when its holder dies, never hastens it.
//
// A lease of exactly the TTL, rounded up to seconds, could be reused for the
// fraction of a second the rounding leaves, so leases are granted longer by
// a reuse window (a tenth of the TTL, at least windowMin): a holder that dies
// keeps its key that much longer, at most. A pooled lease too old for the
// next attempt is revoked, and that attempt grants a new one.
//
// No key is ever on a pooled lease, and no revoke is ever pending for one (a
// late revoke would delete the next lock's key): a lease enters the pool
// unused by an attempt, or when the key a release deleted was on it and it
// is its lock's handle's, the lease the Driver put the key on; the leases
// handed to revokeLater are those the Driver drops, which no handle of a
// live lock can bring back, since only a pooled or new lease gets a key.

// Bounds of the pool and of the revokes in the background.
const (
	poolMax      = 64              // leases kept; more are revoked
	revokesMax   = 64              // revokes in flight; more leases run out instead
	revokeWithin = 2 * time.Second // one revoke's time, and Close's for the pool
	windowMin    = 1 * time.Second // the reuse window's least
	windowPart   = 10              // the reuse window is TTL/windowPart, at least windowMin
	second       = int64(time.Second)
)

// lease is an etcd lease of this Driver: it lasts ttl seconds from fresh at
// least.
type lease struct {
	id    clientv3.LeaseID
	ttl   int64     // seconds, as granted
	fresh time.Time // when its grant or last keep-alive was sent
}

// covers says whether l lasts ttl from now.
func (l lease) covers(now time.Time, ttl time.Duration) bool {
	return !l.fresh.Add(time.Duration(l.ttl) * time.Second).Before(now.Add(ttl))
}

// hold is a held lock's Grant.Handle: its key as this Driver wrote it last,
// and the lease it is on. The fields after rev are guarded by the Driver's
// mu.
type hold struct {
	b     *Driver
	owner string
	rev   int64 // the key's create revision
	l     lease
	class time.Duration // the TTL the lease was granted for: its pool
	// The key's mod revision after this Driver's last write of it, and
	// whether that left it one count: a release may then compare that
	// revision alone.
	modRev int64
	one    bool
	done   bool // released: its lease went back to the pool or away
}

// newHold is the handle of a lock granted by a write at revision modRev.
func (b *Driver) newHold(a backend.Attempt, createRev, modRev int64, l lease, one bool) *hold {
	return &hold{b: b, owner: a.Owner, rev: createRev, l: l, class: a.TTL, modRev: modRev, one: one}
}

// lastWrite is h's key as this Driver last wrote it with one count, if h is
// the lock of owner and create revision rev; zero otherwise.
func (b *Driver) lastWrite(h *hold, owner string, rev int64) written {
	if h == nil || h.owner != owner || h.rev != rev {
		return written{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if h.done || !h.one {
		return written{}
	}
	return written{modRev: h.modRev, lease: h.l.id}
}

// leaseSeconds is a lease's TTL for locks of ttl: ttl rounded up to whole
// seconds, and the reuse window. The server raises it to its minimum.
func leaseSeconds(ttl time.Duration) int64 {
	return ceilSeconds(ttl) + ceilSeconds(max(windowMin, ttl/windowPart))
}

func ceilSeconds(d time.Duration) int64 { return (int64(d) + second - 1) / second }

// leaseFor returns a lease for an attempt of ttl: a pooled one that covers
// ttl from now, or one granted now (pooled false). Pooled leases too old for
// ttl are revoked in the background.
func (b *Driver) leaseFor(ctx context.Context, ttl time.Duration) (l lease, pooled bool, err error) {
	now := b.now()
	var stale []clientv3.LeaseID
	b.mu.Lock()
	s := b.pool[ttl]
	for len(s) > 0 && !pooled {
		l, s = s[len(s)-1], s[:len(s)-1]
		b.pooled--
		if pooled = l.covers(now, ttl); !pooled {
			stale = append(stale, l.id)
		}
	}
	if len(s) == 0 {
		delete(b.pool, ttl) // a TTL used once keeps no entry
	} else {
		b.pool[ttl] = s
	}
	b.mu.Unlock()
	for _, id := range stale {
		b.revokeLater(id)
	}
	if pooled {
		return l, true, nil
	}
	l, err = b.grant(ctx, ttl)
	return l, false, err
}

// grant asks etcd for a new lease for locks of ttl.
func (b *Driver) grant(ctx context.Context, ttl time.Duration) (lease, error) {
	sent := b.now()
	g, err := b.c.Grant(ctx, leaseSeconds(ttl))
	if err != nil {
		return lease{}, err
	}
	return lease{id: g.ID, ttl: g.TTL, fresh: sent}, nil
}

// giveBack pools l, which holds no key, for locks of ttl; a lease that can
// no longer cover ttl, or one the pool has no room for, is revoked in the
// background.
func (b *Driver) giveBack(l lease, ttl time.Duration) {
	now := b.now()
	b.mu.Lock()
	if !b.closed && b.pooled < poolMax && l.covers(now, ttl) {
		b.pool[ttl] = append(b.pool[ttl], l)
		b.pooled++
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	b.revokeLater(l.id)
}

// holdOf is the Driver's state of a lock from its Lease's handle; nil for
// none, or another Driver's.
func (b *Driver) holdOf(handle any) *hold {
	if h, ok := handle.(*hold); ok && h.b == b {
		return h
	}
	return nil
}

// current is the lease h's key is on as far as this Driver knows, unless
// h is nil or released.
func (b *Driver) current(h *hold) (lease, bool) {
	if h == nil {
		return lease{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return h.l, !h.done
}

// renewed records a keep-alive of h's lease id sent at sent.
func (b *Driver) renewed(h *hold, id clientv3.LeaseID, sent time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !h.done && h.l.id == id && sent.After(h.l.fresh) {
		h.l.fresh = sent
	}
}

// moved records that h's key is now on l, granted for locks of ttl, by a
// write at revision modRev that left it one count or not.
func (b *Driver) moved(h *hold, l lease, ttl time.Duration, modRev int64, one bool) {
	if h == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !h.done {
		h.l, h.class, h.modRev, h.one = l, ttl, modRev, one
	}
}

// released deals with the lease prev of a key just deleted: back to the pool
// when it is h's (nothing else is ever put on it), otherwise revoked in the
// background.
func (b *Driver) released(h *hold, prev clientv3.LeaseID) {
	if h != nil {
		b.mu.Lock()
		mine := !h.done && h.l.id == prev
		h.done = true
		l, class := h.l, h.class
		b.mu.Unlock()
		if mine {
			b.giveBack(l, class)
			return
		}
	}
	b.revokeLater(prev)
}

// revokeLater revokes id on a goroutine of its own, which Close waits for.
// With too many in flight, or after Close, the lease is left to run out: it
// holds no key.
func (b *Driver) revokeLater(id clientv3.LeaseID) {
	if id == clientv3.NoLease {
		return
	}
	b.mu.Lock()
	if b.closed || b.revoking >= revokesMax {
		b.mu.Unlock()
		return
	}
	b.revoking++
	b.revokes.Add(1) // under mu, so that Close waits for it
	b.mu.Unlock()
	go func() {
		defer b.revokes.Done()
		ctx, cancel := context.WithTimeout(context.Background(), revokeWithin)
		_, _ = b.c.Revoke(ctx, id)
		cancel()
		b.mu.Lock()
		b.revoking--
		b.mu.Unlock()
	}()
}

// drainPool revokes the pooled leases, within revokeWithin: Close's.
func (b *Driver) drainPool(pool map[time.Duration][]lease) {
	ctx, cancel := context.WithTimeout(context.Background(), revokeWithin)
	defer cancel()
	for _, ls := range pool {
		for _, l := range ls {
			_, _ = b.c.Revoke(ctx, l.id) // one gone already needs nothing
			if ctx.Err() != nil {
				return
			}
		}
	}
}
