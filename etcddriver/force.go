package etcddriver

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/mutex/backend"
)

// ForceRelease deletes key when it is held under f.Token (0: whoever holds
// it), whatever its count, and revokes its lease. In the same transaction it
// records the release beside the key (Inspect shows it). The floor is the
// holder's token + 1: every later holder's create revision exceeds that
// transaction's, so its token exceeds the floor with no counter kept. The
// holder's Release and Extend find the key gone; watchers see the delete.
// When Released is false nothing changed: the key was free (Token 0) or held
// under another token (Token says which).
func (b *Driver) ForceRelease(ctx context.Context, key string, f backend.Force) (backend.Forced, error) {
	if err := b.check(key, "", false); err != nil {
		return backend.Forced{}, err
	}
	if f.Token < 0 {
		return backend.Forced{}, invalid("token %d is negative", f.Token)
	}
	key = b.name(key)
	for range reentryTries {
		out, done, err := b.force(ctx, key, f)
		if done || err != nil {
			return out, err
		}
	}
	return backend.Forced{}, fmt.Errorf("etcddriver: force release %q: the key changed under %d tries", key, reentryTries)
}

// force makes one try; done is false when the key changed between the read
// and the transaction.
func (b *Driver) force(ctx context.Context, key string, f backend.Force) (backend.Forced, bool, error) {
	r, err := b.c.Get(ctx, key)
	if err != nil {
		return backend.Forced{}, false, fmt.Errorf("etcddriver: force release %q: %w", key, err)
	}
	kv := first(r.Kvs)
	if kv == nil {
		return backend.Forced{}, true, nil
	}
	tok := b.token(kv.CreateRevision)
	if f.Token != 0 && f.Token != tok {
		return backend.Forced{Token: tok}, true, nil
	}
	h, _ := decode(kv.Value) // a key not of ours is freed all the same
	out := backend.Forced{Released: true, Token: tok, Floor: tok + 1, Owner: h.owner, Count: int(h.count)}
	rec, _ := json.Marshal(backend.ForceRecord{
		ID: strconv.FormatInt(tok, 10), At: time.Now(), By: f.By, Reason: f.Reason,
		Token: tok, Floor: out.Floor, Owner: h.owner, Count: int(h.count),
	})
	t, err := b.c.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpDelete(key), clientv3.OpPut(auditKey(key, tok), string(rec))).
		Commit()
	if err != nil {
		return backend.Forced{}, false, fmt.Errorf("etcddriver: force release %q: %w", key, err)
	}
	if !t.Succeeded {
		return backend.Forced{}, false, nil
	}
	b.revoke(ctx, clientv3.LeaseID(kv.Lease))
	return out, true, nil
}
