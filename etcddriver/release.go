package etcddriver

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/mutex/backend"
)

// Release takes one count of l: the counts left, 0 when the key was deleted
// (its watchers see the delete; its lease, on which nothing is left, goes
// back to the pool for the next lock, or is revoked in the background when
// it is not the one l's handle knows), or -1 when l's owner and token
// (create revision) do not hold the key, in which case nothing changed.
// Owner and create revision are compared in the transaction that changes
// the key, so a retried release never frees a newer holder's key (etcd issue
// 22082). On error the outcome is unknown.
func (b *Driver) Release(ctx context.Context, l backend.Lease) (int64, error) {
	l, rev, err := b.checkLease(l, false)
	if err != nil {
		return 0, err
	}
	h := b.holdOf(l.Handle)
	w := b.lastWrite(h, l.Owner, rev)
	for range reentryTries {
		// The last count: delete. Otherwise read what is there.
		cmp, del := releaseIf(l, rev, w)
		r, err := b.c.Txn(ctx).If(cmp...).Then(del).Else(clientv3.OpGet(l.Key)).Commit()
		if err != nil {
			return 0, fmt.Errorf("etcddriver: release %q: %w", l.Key, err)
		}
		if r.Succeeded {
			if w.modRev == 0 { // the lease from the deleted key
				prev := r.Responses[0].GetResponseDeleteRange().PrevKvs
				w.lease = clientv3.LeaseID(first(prev).GetLease())
			}
			b.released(h, w.lease)
			return 0, nil
		}
		kv := first(r.Responses[0].GetResponseRange().Kvs)
		hd, ok := b.holds(kv, l.Owner, rev)
		switch {
		case !ok:
			return -1, nil
		case hd.count == 1: // written since w: delete as it is now
			w = written{modRev: kv.ModRevision, lease: clientv3.LeaseID(kv.Lease)}
			continue
		}
		hd.count--
		r, err = b.c.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(l.Key), "=", kv.ModRevision)).
			Then(clientv3.OpPut(l.Key, encode(hd), clientv3.WithIgnoreLease())).
			Commit()
		if err != nil {
			return 0, fmt.Errorf("etcddriver: release %q: %w", l.Key, err)
		}
		if r.Succeeded {
			return hd.count, nil
		}
		w = written{}
	}
	return 0, fmt.Errorf("etcddriver: release %q: the owner's count changed under %d tries", l.Key, reentryTries)
}

// written is a lock key as last written with one count, when known
// (modRev > 0): its mod revision and its lease.
type written struct {
	modRev int64
	lease  clientv3.LeaseID
}

// releaseIf is the compare and the delete of a release: with the key as last
// written known, one compare of its mod revision (no other write can leave
// that revision on the key: it is that holding, with one count, on that
// lease); otherwise owner, one count and create revision compared, and the
// deleted key returned for its lease.
func releaseIf(l backend.Lease, rev int64, w written) ([]clientv3.Cmp, clientv3.Op) {
	if w.modRev > 0 {
		return []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(l.Key), "=", w.modRev)}, clientv3.OpDelete(l.Key)
	}
	return append(lastCount(l.Key, l.Owner), clientv3.Compare(clientv3.CreateRevision(l.Key), "=", rev)),
		clientv3.OpDelete(l.Key, clientv3.WithPrevKV())
}

// holds decodes kv when owner holds it under create revision rev.
func (b *Driver) holds(kv *mvccpb.KeyValue, owner string, rev int64) (holding, bool) {
	if kv == nil || kv.CreateRevision != rev {
		return holding{}, false
	}
	h, err := decode(kv.Value)
	if err != nil || h.owner != owner {
		return holding{}, false
	}
	return h, true
}

func first(kvs []*mvccpb.KeyValue) *mvccpb.KeyValue {
	if len(kvs) == 0 {
		return nil
	}
	return kvs[0]
}

// Abandon deletes key when owner holds it, whatever its count, and revokes
// its lease: the clean-up of an attempt whose outcome is unknown. A key
// another owner holds is left alone.
func (b *Driver) Abandon(ctx context.Context, key, owner string) error {
	if err := b.check(key, owner, true); err != nil {
		return err
	}
	key = b.name(key)
	r, err := b.c.Txn(ctx).
		If(ownedBy(key, owner)...).
		Then(clientv3.OpDelete(key, clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return fmt.Errorf("etcddriver: abandon %q: %w", key, err)
	}
	if r.Succeeded {
		if prev := r.Responses[0].GetResponseDeleteRange().PrevKvs; len(prev) == 1 {
			b.revoke(ctx, clientv3.LeaseID(prev[0].Lease))
		}
	}
	return nil
}
