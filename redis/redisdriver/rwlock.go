package redisdriver

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisinspect"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// The Driver keeps read-write locks (backend.RWLocker) in four keys beside
// the lock of the same name, in its hash slot (redisproto.RWKeys), on the
// server's clock; lua/rw_acquire.lua has the layout. Their tokens are their
// own sequence, as a semaphore's are.

// AcquireRW runs the acquire script once. An error leaves the outcome
// unknown; when the call was given up on, a ReleaseRW of a.Owner with token
// 0 waits for it to end first.
func (d *Driver) AcquireRW(ctx context.Context, a backend.RWAttempt) (backend.Grant, error) {
	keys, err := d.rwKeys(a.Key)
	if err != nil {
		return backend.Grant{}, err
	}
	if a.TTL < time.Millisecond {
		return backend.Grant{}, invalid("read-write lock attempt with lease %v", a.TTL)
	}
	mode, queue := "r", "0"
	if a.Write {
		mode = "w"
	}
	if a.Queue {
		queue = "1"
	}
	reply, err := d.attempt(ctx, a.Owner, redisproto.RWAcquireScript, keys[:4],
		a.Owner, a.TTL.Milliseconds(), mode, queue, d.keyTTL(a.TTL))
	if err != nil {
		return backend.Grant{}, err
	}
	least := int64(0) // a read before any write gets token 0
	if a.Write {
		least = 1
	}
	g, err := parsePermit(reply, least)
	if err != nil {
		return g, errUnexpectedRW
	}
	return g, nil
}

// ReleaseRW runs the release script: true when h's hold was held. With
// h.Token 0 (a clean-up), it first waits for the acquire calls of h.Owner
// given up on, as ReleasePermit does.
func (d *Driver) ReleaseRW(ctx context.Context, h backend.Lease) (bool, error) {
	keys, err := d.rwKeys(h.Key)
	if err != nil {
		return false, err
	}
	return d.releaseAfter(ctx, h, func(ctx context.Context) (bool, error) { return d.releaseRW(ctx, keys, h) })
}

func (d *Driver) releaseRW(ctx context.Context, keys []string, h backend.Lease) (bool, error) {
	var n int64
	_, err := d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		n, err = redisproto.RWReleaseScript.Run(ctx, d.client, keys[:4], h.Owner,
			strconv.FormatInt(h.Token, 10), keys[4], d.publish).Int64()
		return err
	})
	d.reload.NoAnswer(err)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// ExtendRW sends the extensions in one pipelined round trip, as Extend does
// for locks.
func (d *Driver) ExtendRW(ctx context.Context, holds []backend.Lease) ([]backend.Renewal, error) {
	if len(holds) == 0 {
		return nil, nil
	}
	calls := make([]redisproto.Call, len(holds))
	for i, h := range holds {
		keys, err := d.rwKeys(h.Key)
		if err != nil {
			return nil, err
		}
		calls[i] = redisproto.Call{Keys: keys[:4], Args: []any{h.Owner, strconv.FormatInt(h.Token, 10), h.TTL.Milliseconds(), d.keyTTL(h.TTL)}}
	}
	return d.renew(ctx, redisproto.RWExtendScript, calls)
}

// DowngradeRW runs the downgrade script.
func (d *Driver) DowngradeRW(ctx context.Context, h backend.Lease) (bool, error) {
	keys, err := d.rwKeys(h.Key)
	if err != nil {
		return false, err
	}
	if h.TTL < time.Millisecond {
		return false, invalid("read-write lock downgrade with lease %v", h.TTL)
	}
	var n int64
	_, err = d.run.Call(ctx, func(ctx context.Context) error {
		var err error
		n, err = redisproto.RWDowngradeScript.Run(ctx, d.client, keys[:4], h.Owner, strconv.FormatInt(h.Token, 10),
			h.TTL.Milliseconds(), d.keyTTL(h.TTL), keys[4], d.publish).Int64()
		return err
	})
	d.reload.NoAnswer(err)
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// InspectRW runs the inspect script, read-only, as InspectSemaphore does.
func (d *Driver) InspectRW(ctx context.Context, key string) (backend.RWState, error) {
	keys, err := d.rwKeys(key)
	if err != nil {
		return backend.RWState{}, err
	}
	reply, err := d.inspectRO(ctx, redisproto.RWInspectScript, keys[:4])
	if err != nil {
		return backend.RWState{}, err
	}
	return redisinspect.ParseRW(reply)
}

// WatchRW subscribes to key's read-write lock channel, as Watch does to its
// lock's.
func (d *Driver) WatchRW(key string, wake func()) (ready <-chan struct{}, stop func()) {
	lockKey, err := d.lockKey(key)
	if err != nil {
		return make(chan struct{}), func() {}
	}
	return d.subs.Watch(redisproto.RWChannelOf(lockKey), wake)
}

// rwKeys are the keys of key's read-write lock and, last, its channel.
func (d *Driver) rwKeys(key string) ([]string, error) {
	lockKey, err := d.lockKey(key)
	if err != nil {
		return nil, err
	}
	return append(redisproto.RWKeys(lockKey), redisproto.RWChannelOf(lockKey)), nil
}

var errUnexpectedRW = errors.New("mutex: unexpected reply from a read-write lock script")
