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

// Extend renews each lease, in order: Renewed when its key is still held by
// its owner under its token (create revision) with a lease that now runs at
// least its TTL (whole seconds, rounded up) from no earlier than the call;
// Gone when not (nothing was changed); Unknown, with the error, when etcd
// did not answer or the key moved to another lease meanwhile. The lease the lock's handle names is kept alive
// (KeepAliveOnce), then the key is checked to still be on it; a lease too
// short for the TTL, or a lock without this Driver's handle, gets a new
// lease put on the key in a transaction that compares owner and create
// revision.
func (b *Driver) Extend(ctx context.Context, leases []backend.Lease) ([]backend.Renewal, error) {
	named, revs := make([]backend.Lease, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		var err error
		if named[i], revs[i], err = b.checkLease(l, true); err != nil {
			return nil, err
		}
	}
	out := make([]backend.Renewal, len(leases)) // Unknown
	var errs []error
	for i, l := range named {
		r, err := b.extend(ctx, l, revs[i])
		out[i] = r
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func (b *Driver) extend(ctx context.Context, l backend.Lease, rev int64) (backend.Renewal, error) {
	h := b.holdOf(l.Handle)
	if cur, ok := b.current(h); ok && cur.ttl >= ceilSeconds(l.TTL) {
		sent := b.now()
		_, err := b.c.KeepAliveOnce(ctx, cur.id)
		switch {
		case err == nil:
			// After the keep-alive, so that a key deleted meanwhile is seen.
			r, err := b.c.Txn(ctx).
				If(append(held(l.Key, l.Owner, rev), clientv3.Compare(clientv3.LeaseValue(l.Key), "=", cur.id))...).
				Commit()
			if err != nil {
				return backend.Unknown, fmt.Errorf("etcddriver: extend %q: %w", l.Key, err)
			}
			if r.Succeeded {
				b.renewed(h, cur.id, sent)
				return backend.Renewed, nil
			}
		case !errors.Is(err, rpctypes.ErrLeaseNotFound):
			return backend.Unknown, fmt.Errorf("etcddriver: extend %q: keep-alive: %w", l.Key, err)
		}
	}
	return b.regrant(ctx, l, rev, h)
}

// regrant puts the key of l on a new lease, if l still holds it; h, when
// not nil, learns of the move. The new lease runs at least l's TTL, and at
// least what the key's current lease has left: that lease may be another
// holding's of the same owner (a re-entry with a longer TTL moved the key
// onto it), whose deadline must not come early. A key moved meanwhile is
// Unknown: the next renewal tries again.
func (b *Driver) regrant(ctx context.Context, l backend.Lease, rev int64, h *hold) (backend.Renewal, error) {
	ttl, cur, err := b.cover(ctx, l, rev)
	switch {
	case err != nil:
		return backend.Unknown, err
	case ttl < 0:
		return backend.Gone, nil
	}
	g, err := b.grant(ctx, ttl)
	if err != nil {
		return backend.Unknown, fmt.Errorf("etcddriver: extend %q: lease: %w", l.Key, err)
	}
	r, err := b.c.Txn(ctx).
		If(append(held(l.Key, l.Owner, rev), clientv3.Compare(clientv3.LeaseValue(l.Key), "=", cur))...).
		Then(clientv3.OpPut(l.Key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(g.id), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return backend.Unknown, fmt.Errorf("etcddriver: extend %q: %w", l.Key, err)
	}
	if !r.Succeeded {
		b.giveBack(g, ttl) // nothing was put on it
		return backend.Unknown, fmt.Errorf("etcddriver: extend %q: the key changed meanwhile", l.Key)
	}
	prev := r.Responses[0].GetResponsePut().PrevKv
	hd, err := decode(prev.GetValue())
	b.moved(h, g, ttl, r.Header.Revision, err == nil && hd.count == 1)
	if prev != nil && clientv3.LeaseID(prev.Lease) != g.id {
		b.revokeLater(clientv3.LeaseID(prev.Lease))
	}
	return backend.Renewed, nil
}

// cover is the TTL a new lease for l's key needs (l's, or the current
// lease's remaining time and a second more, its rounding, if that is
// longer) and the current lease; ttl is negative when l does not hold the
// key. An error is etcd's: the outcome is unknown.
func (b *Driver) cover(ctx context.Context, l backend.Lease, rev int64) (ttl time.Duration, cur clientv3.LeaseID, err error) {
	r, err := b.c.Txn(ctx).If(held(l.Key, l.Owner, rev)...).Then(clientv3.OpGet(l.Key)).Commit()
	if err != nil {
		return 0, 0, fmt.Errorf("etcddriver: extend %q: %w", l.Key, err)
	}
	if !r.Succeeded {
		return -1, 0, nil
	}
	kv := first(r.Responses[0].GetResponseRange().Kvs)
	if kv == nil {
		return -1, 0, nil
	}
	cur = clientv3.LeaseID(kv.Lease)
	left, _, err := b.leaseLeft(ctx, cur)
	if err != nil {
		return 0, 0, fmt.Errorf("etcddriver: extend %q: %w", l.Key, err)
	}
	return max(l.TTL, left+time.Second), cur, nil
}

// TTL is what is left of l's lease (whole seconds, rounded down: 0 while
// under a second is left), or -1 when l's owner and token do not hold the
// key.
func (b *Driver) TTL(ctx context.Context, l backend.Lease) (time.Duration, error) {
	l, rev, err := b.checkLease(l, false)
	if err != nil {
		return 0, err
	}
	r, err := b.c.Txn(ctx).If(held(l.Key, l.Owner, rev)...).Then(clientv3.OpGet(l.Key)).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcddriver: ttl %q: %w", l.Key, err)
	}
	if !r.Succeeded {
		return -1, nil
	}
	kv := first(r.Responses[0].GetResponseRange().Kvs)
	if kv == nil {
		return -1, nil
	}
	left, _, err := b.leaseLeft(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return 0, fmt.Errorf("etcddriver: ttl %q: %w", l.Key, err)
	}
	if left < 0 { // the lease ended since the read: the key went with it
		return -1, nil
	}
	return left, nil
}
