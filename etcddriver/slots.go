package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/mutex/backend"
)

// Package runner's slot claims and run records (backend.SlotClaimer).
//
// etcd has no clock a client can read (a response header carries the
// revision and the raft term, no time), so the slot numbers are the
// runner's, from its replica's clock; what etcd gives is the order. A claim
// is one transaction that writes the slot unless the stored one is as high,
// so a slot is claimed once however the replicas' clocks disagree, and
// never after a higher one. Time on the servers exists only as leases,
// which the leader counts: the gap between claims is a key on a lease of
// its own, which the claim needs gone.
//
// The keys are the runner's as it names them, under its own prefix
// (runner.WithPrefix) and not the Driver's, which names lock keys: a NUL
// and a name after them keep them out of List (as the audit records are). Claims and records sit on a
// lease kept per TTL (kept), as a pooled lock lease is, but never revoked:
// they must outlive the Driver that wrote them, for the other replicas.

// Where the runner's data lives, beside the key it names.
const (
	claimSuffix  = "\x00claim"
	gateSuffix   = "\x00gate"
	recordSuffix = "\x00record"
	keptMax      = 64 // TTLs with a kept lease; others grant one per call
)

// ClaimSlot claims c.Slot of c.Key in one transaction: the claim key's
// value (the slot, then c.Claimer) is written when the key is absent or
// holds a lower slot, and the gap key, if any, is absent. Or else the claim
// key is read: one with c.Slot and c.Claimer is this claimer's (a retry
// whose first reply was lost), true too. Both keys are put on leases: the
// claim on one lasting c.TTL from the call at least; the gap on one granted
// just before, for c.Gap rounded down to whole seconds, which the leader
// counts and a new leader only lengthens. A gap under a second, or under
// the server's least lease TTL (learnt from a grant it raised), is left
// out. On error the outcome is unknown.
func (b *Driver) ClaimSlot(ctx context.Context, c backend.SlotClaim) (bool, error) {
	if err := b.check(c.Key, c.Claimer, true); err != nil {
		return false, err
	}
	switch {
	case c.TTL <= 0:
		return false, invalid("TTL %v is not positive", c.TTL)
	case c.Gap < 0:
		return false, invalid("gap %v is negative", c.Gap)
	}
	var claimed bool
	err := b.withKept(ctx, c.TTL, func(keep lease) error {
		gate, err := b.gateLease(ctx, c.Gap)
		if err != nil {
			return err
		}
		claimed, err = b.claim(ctx, c, keep.id, gate)
		if (err == nil && !claimed) || errors.Is(err, rpctypes.ErrLeaseNotFound) {
			b.revokeLater(gate) // nothing is on it
		}
		return err
	})
	if err != nil {
		return false, fmt.Errorf("etcddriver: claim slot %d of %q: %w", c.Slot, c.Key, err)
	}
	return claimed, nil
}

// claim is ClaimSlot's transaction, with the gap's lease gate (NoLease:
// none).
func (b *Driver) claim(ctx context.Context, c backend.SlotClaim, keep, gate clientv3.LeaseID) (bool, error) {
	ck, gk := c.Key+claimSuffix, c.Key+gateSuffix
	mine := slotValue(c.Slot) + "\x00" + c.Claimer
	puts := []clientv3.Op{clientv3.OpPut(ck, mine, clientv3.WithLease(keep))}
	if gate != clientv3.NoLease {
		puts = append(puts, clientv3.OpPut(gk, "", clientv3.WithLease(gate)))
	}
	open := clientv3.Compare(clientv3.CreateRevision(gk), "=", 0)
	// A value compare fails on an absent key: the absent claim is the outer
	// transaction's case, a lower slot the inner one's.
	r, err := b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(ck), "=", 0), open).
		Then(puts...).
		Else(clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(ck), "<", slotValue(c.Slot)), open},
			puts,
			[]clientv3.Op{clientv3.OpGet(ck)},
		)).
		Commit()
	if err != nil {
		return false, err
	}
	if r.Succeeded {
		return true, nil
	}
	in := r.Responses[0].GetResponseTxn()
	if in.Succeeded {
		return true, nil
	}
	kv := first(in.Responses[0].GetResponseRange().Kvs)
	return kv != nil && string(kv.Value) == mine, nil
}

// slotValue orders slots as etcd compares values, byte by byte: the slot
// with its sign bit flipped, in 16 hex digits.
func slotValue(slot int64) string { return fmt.Sprintf("%016x", uint64(slot)^1<<63) }

// gateLease grants the lease of a claim's gap: gap in whole seconds, rounded
// down, or none (NoLease) when that is under a second or under the server's
// least TTL. A lease the server raised to its least TTL would hold the gap
// longer than asked, refusing claims the runner is owed: it is revoked, and
// the least TTL kept for the next claims.
func (b *Driver) gateLease(ctx context.Context, gap time.Duration) (clientv3.LeaseID, error) {
	secs := int64(gap / time.Second)
	if secs < 1 || secs < b.minLease.Load() {
		return clientv3.NoLease, nil
	}
	g, err := b.c.Grant(ctx, secs)
	if err != nil {
		return clientv3.NoLease, err
	}
	if g.TTL > secs {
		b.minLease.Store(g.TTL)
		b.revokeLater(g.ID)
		return clientv3.NoLease, nil
	}
	return g.ID, nil
}

// PutRecord puts value at key's record, on a kept lease that lasts ttl from
// the call at least. On error the outcome is unknown.
func (b *Driver) PutRecord(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := b.check(key, "", false); err != nil {
		return err
	}
	if ttl <= 0 {
		return invalid("TTL %v is not positive", ttl)
	}
	err := b.withKept(ctx, ttl, func(keep lease) error {
		_, err := b.c.Put(ctx, key+recordSuffix, string(value), clientv3.WithLease(keep.id))
		return err
	})
	if err != nil {
		return fmt.Errorf("etcddriver: put record %q: %w", key, err)
	}
	return nil
}

// GetRecord reads key's record: found false when there is none.
func (b *Driver) GetRecord(ctx context.Context, key string) ([]byte, bool, error) {
	if err := b.check(key, "", false); err != nil {
		return nil, false, err
	}
	r, err := b.c.Get(ctx, key+recordSuffix)
	if err != nil {
		return nil, false, fmt.Errorf("etcddriver: get record %q: %w", key, err)
	}
	kv := first(r.Kvs)
	if kv == nil {
		return nil, false, nil
	}
	return kv.Value, true, nil
}

// withKept runs write with a kept lease that lasts ttl from now, and once
// more with a new one when etcd no longer has it (the transaction then
// wrote nothing).
func (b *Driver) withKept(ctx context.Context, ttl time.Duration, write func(keep lease) error) error {
	keep, err := b.kept(ctx, ttl, clientv3.NoLease)
	if err != nil {
		return err
	}
	err = write(keep)
	if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return err
	}
	if keep, err = b.kept(ctx, ttl, keep.id); err != nil {
		return err
	}
	return write(keep)
}

// kept is the lease kept for data of ttl, granted afresh when it no longer
// lasts ttl from now or is gone (its id).
func (b *Driver) kept(ctx context.Context, ttl time.Duration, gone clientv3.LeaseID) (lease, error) {
	now := b.now()
	b.mu.Lock()
	l, ok := b.keep[ttl]
	b.mu.Unlock()
	if ok && l.id != gone && l.covers(now, ttl) {
		return l, nil
	}
	l, err := b.grant(ctx, ttl)
	if err != nil {
		return lease{}, err
	}
	b.mu.Lock()
	if _, ok := b.keep[ttl]; ok || len(b.keep) < keptMax {
		b.keep[ttl] = l
	}
	b.mu.Unlock()
	return l, nil
}
