package redisdriver

import (
	"context"

	"github.com/redfence/redfence/internal/clusterslot"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

var _ backend.Batcher = (*Driver)(nil)

// Group is key's Cluster hash slot on a Cluster (the slot of its Redis key,
// which is its user key's), and 0 for every key of a standalone or Sentinel
// deployment: one script takes any set of keys there.
func (d *Driver) Group(key string) int {
	if !d.cluster {
		return 0
	}
	lockKey, err := d.lockKey(key)
	if err != nil {
		return 0 // AcquireAll refuses it
	}
	return clusterslot.Of(lockKey)
}

// AcquireAll runs the acquire_all script once over the keys of as: each key
// taken as the acquire script takes it alone, with the same value, token
// and TTL, or none of them taken when another owner holds one. An error
// leaves the outcome unknown; a call given up on (ctx ended first on a
// client without ContextTimeoutEnabled) is waited for by Abandon of the
// attempts' owner. Attempts that are not of one owner, TTL and slot, or
// keys without the prefix, return an error wrapping backend.ErrInvalid.
func (d *Driver) AcquireAll(ctx context.Context, as []backend.Attempt) ([]backend.Grant, int, error) {
	keys, err := d.batchKeys(as)
	if err != nil {
		return nil, -1, err
	}
	a := as[0]
	var grants []backend.Grant
	busy := -1
	pending, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		grants, busy, err = d.acquireAllOnce(ctx, keys, a)
		return err
	})
	d.reload.NoAnswer(err)
	if pending != nil {
		if !a.Shared { // only a random owner is ever abandoned
			d.abandoned.Add(a.Owner, pending)
		}
		return nil, -1, err // the abandoned call may still write grants
	}
	if err != nil {
		return nil, -1, err
	}
	return grants, busy, nil
}

// batchKeys are the Redis keys of as, checked to be one call's.
func (d *Driver) batchKeys(as []backend.Attempt) ([]string, error) {
	if len(as) == 0 {
		return nil, invalid("no attempts")
	}
	keys := make([]string, len(as))
	slot := 0
	for i, a := range as {
		lockKey, err := d.lockKey(a.Key)
		if err != nil {
			return nil, err
		}
		if i == 0 && d.cluster {
			slot = clusterslot.Of(lockKey)
		}
		switch {
		case a.Owner != as[0].Owner || a.TTL != as[0].TTL || a.Shared != as[0].Shared:
			return nil, invalid("the attempts of one AcquireAll differ in owner, TTL or sharing")
		case a.Waiter != "":
			return nil, invalid("AcquireAll takes no waiter")
		case d.cluster && clusterslot.Of(lockKey) != slot:
			return nil, invalid("keys %q and %q are in different hash slots", as[0].Key, a.Key)
		}
		keys[i] = lockKey
	}
	return keys, nil
}

// acquireAllOnce is one call of the acquire_all script.
func (d *Driver) acquireAllOnce(ctx context.Context, keys []string, a backend.Attempt) ([]backend.Grant, int, error) {
	reply, err := redisproto.AcquireAllScript.Run(ctx, d.client, keys, a.Owner, a.TTL.Milliseconds(), d.keyTTL(a.TTL)).Result()
	if err != nil {
		return nil, -1, err
	}
	each, busy, err := redisproto.ParseAcquireAll(reply, len(keys))
	if err != nil || busy >= 0 {
		return nil, busy, err
	}
	grants := make([]backend.Grant, len(keys))
	for i, r := range each {
		n, tokenStr, err := redisproto.ParseAcquire(r)
		if err != nil {
			return nil, -1, err
		}
		if n[0] == 0 { // the script reports a held key as busy, never among the grants
			return nil, -1, errUnexpectedAcquireAll
		}
		grants[i] = d.grant(n, tokenStr, keys[i], "", a.TTL)
	}
	return grants, -1, nil
}
