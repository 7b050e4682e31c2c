package redisdriver

import (
	"context"

	"github.com/redfence/redfence/redis/internal/redisproto"
)

// Leave takes waiter out of key's queue of waiting Lockers (ZREM), so that
// a release is not reserved for it in vain. (An acquisition by the acquire
// script leaves it already.)
func (d *Driver) Leave(ctx context.Context, key, waiter string) error {
	lockKey, err := d.lockKey(key)
	if err != nil {
		return err
	}
	_, err = d.run.Call(ctx, func(ctx context.Context) error {
		return d.client.ZRem(ctx, redisproto.QueueOf(lockKey), waiter).Err()
	})
	d.reload.NoAnswer(err)
	return err
}

// Watch subscribes to key's release channel (SSUBSCRIBE on Cluster) and
// calls wake, without a lock held, for each release published there that
// is not reserved for another Locker's waiter, until stop. ready is closed
// once the server confirmed the subscription. A key without the prefix, or
// a closed Driver, reports nothing: ready is never closed (the Locker
// polls) and stop does nothing.
func (d *Driver) Watch(key string, wake func()) (ready <-chan struct{}, stop func()) {
	lockKey, err := d.lockKey(key)
	if err != nil {
		return make(chan struct{}), func() {}
	}
	return d.subs.Watch(redisproto.ChannelOf(lockKey), wake)
}
