package redisdriver

import (
	"errors"
	"reflect"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	invalidpkg "github.com/redfence/redfence/internal/invalid"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisinspect"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

// maxWaiterIDs bounds the Locker ids a Driver remembers (accept); beyond,
// every release notification wakes its watchers.
const maxWaiterIDs = 64

// Driver holds locks on one Redis deployment. It is safe for concurrent
// use. It owns goroutines (calls it stopped waiting for, the release
// subscription), which Close stops; it never closes the client. It shows
// its locks (backend.Inspector) through the Redis inspection it embeds.
type Driver struct {
	*redisinspect.Inspector

	client  redis.UniversalClient
	prefix  string
	cluster bool
	publish string // PUBLISH, or SPUBLISH on Cluster
	keyTTLs redisproto.KeyTTL

	run       *redisrt.Runner
	abandoned *redisrt.Abandoned // acquire calls given up on, by owner; releases without a handle
	reload    *redisrt.Reloader
	subs      *redisrt.Subscriber
	targets   []redisrt.Target // standalone: the one connection for every channel

	idMu sync.RWMutex        // a leaf
	ids  map[string]struct{} // the Waiter ids of this Driver's Lockers (accept)
}

// New returns a Driver over client: a *redis.Client (standalone, or
// Sentinel through NewFailoverClient) or a *redis.ClusterClient, where
// release notifications use sharded pub/sub (Redis 7+). A nil client or a
// bad option returns an error matching mutex.ErrInvalid. It sends nothing
// to the server.
//
// Deadlines: the driver enforces its caller's ctx deadline itself even when
// the client was built without ContextTimeoutEnabled (go-redis then waits
// its read timeout on a hung server); with it enabled, calls run without
// the extra goroutine that enforcement needs.
func New(client redis.UniversalClient, opts ...Option) (*Driver, error) {
	if isNil(client) {
		return nil, invalid("nil redis client")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	_, cluster := client.(*redis.ClusterClient)
	d := &Driver{
		client:  client,
		prefix:  cfg.Prefix,
		cluster: cluster,
		publish: "PUBLISH",
		keyTTLs: redisproto.NewKeyTTL(cfg.FenceTTL),
		run:     redisrt.NewRunner(redisrt.ContextAware(client)),
		reload:  redisrt.NewReloader(client),
		targets: []redisrt.Target{{Name: "", Client: client}},
		ids:     map[string]struct{}{},
	}
	if cluster {
		d.publish = "SPUBLISH"
	}
	d.abandoned = redisrt.NewAbandoned(d.run)
	d.Inspector = redisinspect.New(redisinspect.Config{
		Prefix: cfg.Prefix, Servers: []redis.UniversalClient{client}, Addrs: []string{""},
		Publish: d.publish, Go: d.run.Go, NoAnswer: d.reload.NoAnswer,
	})
	d.subs = redisrt.NewSubscriber(redisrt.SubscriberConfig{
		Sharded: cluster,
		Targets: d.targetsOf,
		Accept:  d.accept,
	})
	return d, nil
}

func isNil(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	}
	return false
}

func invalid(format string, args ...any) error {
	return invalidpkg.Errorf("redisdriver", format, args...)
}

// ClientHolder is a backend's capability to lend adapters that keep data
// next to their locks (httplock's shared responses, asynqlock's busy
// records, idempotency's records) the Redis client of the one deployment
// that holds its locks. A Driver has it; Redlock's driver has not, since
// data kept on one of its masters would rest on that master alone.
type ClientHolder interface {
	Client() redis.UniversalClient
}

// ClientOf returns the client b lends (see ClientHolder), or nil when b
// lends none: b is no ClientHolder, or a nil one.
func ClientOf(b backend.Backend) redis.UniversalClient {
	ch, ok := b.(ClientHolder)
	if !ok || b == nil || reflect.ValueOf(b).Kind() == reflect.Pointer && reflect.ValueOf(b).IsNil() {
		return nil
	}
	if c := ch.Client(); !isNil(c) {
		return c
	}
	return nil
}

// Client returns the deployment's client, for adapters that keep data in
// the same deployment.
func (d *Driver) Client() redis.UniversalClient { return d.client }

// Close stops the release subscription and waits for every goroutine of
// the Driver, calls it stopped waiting for included (a client without
// ContextTimeoutEnabled ends those at its ReadTimeout). It does not close
// the client. Methods called after Close still work, without goroutines;
// watches report nothing. It always returns nil.
func (d *Driver) Close() error {
	d.subs.Close()
	d.run.Close()
	return nil
}

// lockKey is key's Redis key, under the driver's prefix. An empty key is
// bad input.
func (d *Driver) lockKey(key string) (string, error) {
	if key == "" {
		return "", invalid("empty key")
	}
	return redisproto.LockKey(d.prefix, key), nil
}

// lockKeys is lockKey and the key's queue (redisproto.LockKeys).
func (d *Driver) lockKeys(key string) (lockKey, queueKey string, err error) {
	if key == "" {
		return "", "", invalid("empty key")
	}
	lockKey, queueKey = redisproto.LockKeys(d.prefix, key)
	return lockKey, queueKey, nil
}

// keyTTL is how long the Redis key lives past its last use (the fencing
// counter's life, never shorter than the lease), in ms.
func (d *Driver) keyTTL(lease time.Duration) string { return d.keyTTLs.For(lease) }

// targetsOf is where channel ch is subscribed: the one connection of a
// standalone deployment, the channel's own sharded subscription on Cluster.
func (d *Driver) targetsOf(ch string) []redisrt.Target {
	if d.cluster {
		return []redisrt.Target{{Name: ch, Client: d.client}}
	}
	return d.targets
}

// noteWaiter remembers id as one of this Driver's Lockers, whose reserved
// releases its watchers hear (accept).
func (d *Driver) noteWaiter(id string) {
	d.idMu.RLock()
	_, known := d.ids[id]
	full := len(d.ids) >= maxWaiterIDs
	d.idMu.RUnlock()
	if known || full {
		return
	}
	d.idMu.Lock()
	if len(d.ids) < maxWaiterIDs {
		d.ids[id] = struct{}{}
	}
	d.idMu.Unlock()
}

// accept: a release notification carries the Locker the lock is reserved
// for ("" for any); one reserved for another Locker's waiter is not ours to
// try (no herd). Past maxWaiterIDs Lockers, every one is.
func (d *Driver) accept(payload string) bool {
	if payload == "" {
		return true
	}
	d.idMu.RLock()
	defer d.idMu.RUnlock()
	_, ok := d.ids[payload]
	return ok || len(d.ids) >= maxWaiterIDs
}

var (
	errUnexpectedHandoff    = errors.New("mutex: unexpected reply from the handoff script")
	errUnexpectedAcquireAll = errors.New("mutex: unexpected reply from the acquire_all script")
)
