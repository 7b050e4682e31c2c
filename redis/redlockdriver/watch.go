package redlockdriver

import (
	"strconv"

	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

// newSubscriber is the release subscription: a release publishes on every
// node that held the lock, so a key's channel is subscribed on every node,
// one connection per node. Redlock reserves no release for a Locker: every
// notification is the watchers'.
func (d *Driver) newSubscriber() *redisrt.Subscriber {
	targets := make([]redisrt.Target, len(d.nodes))
	for i, c := range d.nodes {
		targets[i] = redisrt.Target{Name: "node" + strconv.Itoa(i), Client: c}
	}
	return redisrt.NewSubscriber(redisrt.SubscriberConfig{
		Channel: func(key string) string { return redisproto.ChannelOf(d.name(key)) },
		Targets: func(string) []redisrt.Target { return targets },
	})
}

// Watch calls wake each time key may have been freed on a node (a release
// or an abandon there published), and each time a node's connection came
// back and subscribed again (releases meanwhile may be lost), until stop is
// called. ready is closed once the first node confirmed the subscription;
// after Close it never is, and nothing is reported (the Locker polls). It
// never blocks on the network. A key the Locker did not prefix is never
// ready either.
func (d *Driver) Watch(key string, wake func()) (ready <-chan struct{}, stop func()) {
	if d.checkKey(key) != nil {
		return make(chan struct{}), func() {}
	}
	return d.subs.Watch(key, wake)
}
