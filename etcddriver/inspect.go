package etcddriver

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/mutex/backend"
)

// auditShown bounds the forced releases Inspect shows, latest first.
const auditShown = 16

// Inspect returns key's state: holder, count, token, when it was acquired
// (the acquiring client's clock), the lease left and when it was last renewed
// (this client's clock less the lease's elapsed time), and the forced
// releases recorded beside it. etcd keeps no queue of waiters, so Waiters is
// empty. Now is this client's clock; Name is the etcd key. It changes
// nothing.
func (b *Driver) Inspect(ctx context.Context, key string) (backend.KeyState, error) {
	if err := b.check(key, "", false); err != nil {
		return backend.KeyState{}, err
	}
	name := b.name(key)
	ap := auditPrefix(name)
	r, err := b.c.Txn(ctx).Then(
		clientv3.OpGet(name),
		clientv3.OpGet(ap, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(auditShown)),
	).Commit()
	if err != nil {
		return backend.KeyState{}, fmt.Errorf("etcddriver: inspect %q: %w", name, err)
	}
	st, err := b.state(ctx, key, first(r.Responses[0].GetResponseRange().Kvs))
	if err != nil {
		return backend.KeyState{}, err
	}
	for _, kv := range r.Responses[1].GetResponseRange().Kvs {
		var rec backend.ForceRecord
		if json.Unmarshal(kv.Value, &rec) == nil {
			st.Forced = append(st.Forced, rec)
		}
	}
	return st, nil
}

// state is the KeyState of key (without the prefix) as kv holds it (nil:
// free).
func (b *Driver) state(ctx context.Context, key string, kv *mvccpb.KeyValue) (backend.KeyState, error) {
	st := backend.KeyState{Key: key, Now: time.Now()}
	if name := b.name(key); name != key {
		st.Name = name
	}
	if kv == nil {
		return st, nil
	}
	st.Token = b.token(kv.CreateRevision)
	h, err := decode(kv.Value)
	if err != nil {
		return st, nil // not a lock of ours: shown by its token alone
	}
	st.Owner, st.Count, st.AcquiredAt = h.owner, int(h.count), h.acquired
	left, granted, err := b.leaseLeft(ctx, clientv3.LeaseID(kv.Lease))
	if err != nil {
		return backend.KeyState{}, fmt.Errorf("etcddriver: inspect %q: lease: %w", b.name(key), err)
	}
	if left >= 0 { // to the second: etcd tells no finer
		st.Lease = left
		st.RenewedAt = st.Now.Add(left - time.Duration(granted)*time.Second)
	}
	return st, nil
}

// List returns up to r.Count lock keys under the Driver's prefix, in key
// order from r.Cursor on ("" starts), without the prefix, and the cursor
// that goes on: the next etcd key, "" once there is none. One range read
// makes the page (r.Scans is not needed: a range read skips no key). A
// cursor not under the prefix, or with a NUL byte, gets an error matching
// backend.ErrBadCursor. The records the Driver keeps beside lock keys
// (forced releases, terms, slot claims) are not listed.
func (b *Driver) List(ctx context.Context, r backend.ListRequest) (backend.ListPage, error) {
	if err := b.usable(); err != nil {
		return backend.ListPage{}, err
	}
	prefix, cursor, limit := b.cfg.prefix, r.Cursor, r.Count
	switch {
	case limit <= 0:
		return backend.ListPage{}, invalid("count %d is not positive", limit)
	case strings.IndexByte(cursor, 0) >= 0: // List hands out lock keys alone
		return backend.ListPage{}, fmt.Errorf("%w: %q has a NUL byte", backend.ErrBadCursor, cursor)
	case cursor != "" && !strings.HasPrefix(cursor, prefix):
		return backend.ListPage{}, fmt.Errorf("%w: %q is not under %q", backend.ErrBadCursor, cursor, prefix)
	}
	kvs, next, err := b.page(ctx, prefix, cursor, limit)
	if err != nil {
		return backend.ListPage{RoundTrips: 1}, err
	}
	out := make([]backend.KeyState, 0, len(kvs))
	for _, kv := range kvs {
		st, err := b.state(ctx, strings.TrimPrefix(string(kv.Key), prefix), kv)
		if err != nil {
			return backend.ListPage{RoundTrips: 1}, err
		}
		out = append(out, st)
	}
	return backend.ListPage{Keys: out, Cursor: next, RoundTrips: 1}, nil
}

// page reads up to limit lock keys under prefix from cursor, skipping audit
// records, and the key after them ("" when none).
func (b *Driver) page(ctx context.Context, prefix, cursor string, limit int) ([]*mvccpb.KeyValue, string, error) {
	from, end := max(prefix, cursor), clientv3.GetPrefixRangeEnd(prefix)
	if prefix == "" {
		end = "\x00" // every key
	}
	if from == "" {
		from = "\x00" // etcd refuses an empty key; no key sorts before it
	}
	var kvs []*mvccpb.KeyValue
	for {
		r, err := b.c.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(int64(limit+1)))
		if err != nil {
			return nil, "", fmt.Errorf("etcddriver: list %q: %w", prefix, err)
		}
		for _, kv := range r.Kvs {
			if strings.IndexByte(string(kv.Key), 0) >= 0 {
				continue
			}
			if len(kvs) == limit {
				return kvs, string(kv.Key), nil
			}
			kvs = append(kvs, kv)
		}
		if !r.More || len(r.Kvs) == 0 {
			return kvs, "", nil
		}
		from = string(r.Kvs[len(r.Kvs)-1].Key) + "\x00"
	}
}
