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

// reentryTries bounds the compare-and-swap of a re-entry racing the same
// owner's other calls; each lost race means another call of the owner
// changed the count meanwhile.
const reentryTries = 4

// Acquire makes one attempt at a.Key, with a lease that lasts a.TTL from
// no earlier than the call (whole seconds, rounded up, and a reuse window;
// at least the server's minimum): one of the Driver's pooled leases that
// covers it, or one granted first (lease.go says why a pooled one keeps
// rule 2). Then one transaction: a free key is put with that lease (token:
// its create revision + the token base); a key a.Owner holds gets one more
// count and the lease (same token); a key another holds is reported Held
// with its lease's remaining time. A lease not used goes back to the pool.
// On error the outcome is unknown.
func (b *Driver) Acquire(ctx context.Context, a backend.Attempt) (backend.Grant, error) {
	if err := b.check(a.Key, a.Owner, true); err != nil {
		return backend.Grant{}, err
	}
	if a.TTL <= 0 {
		return backend.Grant{}, invalid("TTL %v is not positive", a.TTL)
	}
	a.Key = b.name(a.Key)
	mine, pooled, err := b.leaseFor(ctx, a.TTL)
	if err != nil {
		return backend.Grant{}, fmt.Errorf("etcddriver: acquire %q: lease: %w", a.Key, err)
	}
	gr, used, err := b.acquire(ctx, a, mine)
	if pooled && errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// A pooled lease gone (revoked by another client, a cluster
		// restored): the transaction wrote nothing. Once more, granted now.
		if mine, err = b.grant(ctx, a.TTL); err != nil {
			return backend.Grant{}, fmt.Errorf("etcddriver: acquire %q: lease: %w", a.Key, err)
		}
		gr, used, err = b.acquire(ctx, a, mine)
	}
	if !used {
		b.giveBack(mine, a.TTL)
	}
	return gr, err
}

// acquire runs the transaction with the lease mine; used says whether the
// key may now be on it.
func (b *Driver) acquire(ctx context.Context, a backend.Attempt, mine lease) (backend.Grant, bool, error) {
	now := time.Now()
	for range reentryTries {
		r, err := b.c.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(a.Key), "=", 0)).
			Then(clientv3.OpPut(a.Key, encode(holding{a.Owner, 1, now}), clientv3.WithLease(mine.id))).
			Else(clientv3.OpGet(a.Key)).
			Commit()
		if err != nil {
			return backend.Grant{}, true, fmt.Errorf("etcddriver: acquire %q: %w", a.Key, err)
		}
		if r.Succeeded {
			rev := r.Header.Revision
			h := b.newHold(a, rev, rev, mine, true)
			return backend.Grant{Status: backend.Acquired, Token: b.token(rev), Handle: h}, true, nil
		}
		kvs := r.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 { // cannot be: the same transaction found the key
			continue
		}
		kv := kvs[0]
		h, err := decode(kv.Value)
		if err != nil || h.owner != a.Owner {
			left, _, err := b.leaseLeft(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				left = 0 // unknown: the Locker polls sooner
			}
			return backend.Grant{Status: backend.Held, Remaining: left}, false, nil
		}
		gr, done, err := b.reenter(ctx, a, kv.ModRevision, kv.CreateRevision, h, mine)
		if err != nil || done {
			return gr, true, err
		}
	}
	return backend.Grant{}, false, fmt.Errorf("etcddriver: acquire %q: the owner's count changed under %d tries", a.Key, reentryTries)
}

// reenter adds one count to a key a.Owner holds and moves it to the lease
// mine (a.TTL from this call), if the key did not change since modRev; done
// is false when it did. The re-entering Lock's handle is mine.
func (b *Driver) reenter(ctx context.Context, a backend.Attempt, modRev, createRev int64, h holding, mine lease) (backend.Grant, bool, error) {
	h.count++
	r, err := b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(a.Key), "=", modRev)).
		Then(clientv3.OpPut(a.Key, encode(h), clientv3.WithLease(mine.id), clientv3.WithPrevKV())).
		Commit()
	if err != nil {
		return backend.Grant{}, false, fmt.Errorf("etcddriver: re-enter %q: %w", a.Key, err)
	}
	if !r.Succeeded {
		return backend.Grant{}, false, nil
	}
	if prev := r.Responses[0].GetResponsePut().PrevKv; prev != nil {
		// Nothing is on it now. Another Lock of the owner may have it as
		// its handle: its Extend finds it gone and puts the key on a new one.
		b.revokeLater(clientv3.LeaseID(prev.Lease))
	}
	hd := b.newHold(a, createRev, r.Header.Revision, mine, false)
	return backend.Grant{Status: backend.Reentered, Token: b.token(createRev), Handle: hd}, true, nil
}
