package etcdlock

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
// Gone when not (nothing was changed); Unknown when etcd did not answer, with
// the error. The lease the lock's handle names is kept alive
// (KeepAliveOnce), then the key is checked to still be on it; a lease too
// short for the TTL, or a lock without this Backend's handle, gets a new
// lease put on the key in a transaction that compares owner and create
// revision.
func (b *Backend) Extend(ctx context.Context, leases []backend.Lease) ([]backend.Renewal, error) {
	revs := make([]int64, len(leases))
	for i, l := range leases {
		rev, err := b.checkLease(l, true)
		if err != nil {
			return nil, err
		}
		revs[i] = rev
	}
	out := make([]backend.Renewal, len(leases)) // Unknown
	var errs []error
	for i, l := range leases {
		r, err := b.extend(ctx, l, revs[i])
		out[i] = r
		if err != nil {
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}

func (b *Backend) extend(ctx context.Context, l backend.Lease, rev int64) (backend.Renewal, error) {
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
				return backend.Unknown, fmt.Errorf("etcdlock: extend %q: %w", l.Key, err)
			}
			if r.Succeeded {
				b.renewed(h, cur.id, sent)
				return backend.Renewed, nil
			}
		case !errors.Is(err, rpctypes.ErrLeaseNotFound):
			return backend.Unknown, fmt.Errorf("etcdlock: extend %q: keep-alive: %w", l.Key, err)
		}
	}
	return b.regrant(ctx, l, rev, h)
}

// regrant puts the key of l on a new lease for its TTL, if l still holds
// it; h, when not nil, learns of the move.
func (b *Backend) regrant(ctx context.Context, l backend.Lease, rev int64, h *hold) (backend.Renewal, error) {
	g, err := b.grant(ctx, l.TTL)
	if err != nil {
		return backend.Unknown, fmt.Errorf("etcdlock: extend %q: lease: %w", l.Key, err)
	}
	r, err := b.c.Txn(ctx).
		If(held(l.Key, l.Owner, rev)...).
		Then(clientv3.OpPut(l.Key, "", clientv3.WithIgnoreValue(), clientv3.WithLease(g.id), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return backend.Unknown, fmt.Errorf("etcdlock: extend %q: %w", l.Key, err)
	}
	if !r.Succeeded {
		b.giveBack(g, l.TTL) // nothing was put on it
		return backend.Gone, nil
	}
	prev := r.Responses[0].GetResponsePut().PrevKv
	hd, err := decode(prev.GetValue())
	b.moved(h, g, l.TTL, r.Header.Revision, err == nil && hd.count == 1)
	if prev != nil && clientv3.LeaseID(prev.Lease) != g.id {
		b.revokeLater(clientv3.LeaseID(prev.Lease))
	}
	return backend.Renewed, nil
}

// TTL is what is left of l's lease (whole seconds, rounded down: 0 while
// under a second is left), or -1 when l's owner and token do not hold the
// key.
func (b *Backend) TTL(ctx context.Context, l backend.Lease) (time.Duration, error) {
	rev, err := b.checkLease(l, false)
	if err != nil {
		return 0, err
	}
	r, err := b.c.Txn(ctx).If(held(l.Key, l.Owner, rev)...).Then(clientv3.OpGet(l.Key)).Commit()
	if err != nil {
		return 0, fmt.Errorf("etcdlock: ttl %q: %w", l.Key, err)
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
		return 0, fmt.Errorf("etcdlock: ttl %q: %w", l.Key, err)
	}
	if left < 0 { // the lease ended since the read: the key went with it
		return -1, nil
	}
	return left, nil
}
