package redisdriver

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/mutex/internal/redisinspect"
	"github.com/redfence/redfence/mutex/internal/redisproto"
	"github.com/redfence/redfence/mutex/internal/redisrt"
)

// DefaultFenceTTL is Config.FenceTTL's default, which the acquire script
// knows too, so that the common call need not send it.
const DefaultFenceTTL = redisproto.DefaultFenceTTL

// maxWaiterIDs bounds the Locker ids a Driver remembers (accept); beyond,
// every release notification wakes its watchers.
const maxWaiterIDs = 64

// Config configures a Driver.
type Config struct {
	// Prefix is the Locker's key prefix: every key a Driver is given starts
	// with it, and its Redis key is redisproto.LockKey(Prefix, the rest).
	Prefix string
	// FenceTTL is how long a key's fencing counter outlives its last use;
	// at least one second. 0: DefaultFenceTTL.
	FenceTTL time.Duration
}

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
// release notifications use sharded pub/sub (Redis 7+). A nil client, or a
// FenceTTL below one second, returns an error wrapping backend.ErrInvalid.
// It sends nothing to the server.
func New(client redis.UniversalClient, cfg Config) (*Driver, error) {
	if isNil(client) {
		return nil, invalid("nil redis client")
	}
	switch {
	case cfg.FenceTTL == 0:
		cfg.FenceTTL = DefaultFenceTTL
	case cfg.FenceTTL < time.Second:
		return nil, invalid("fence TTL %v is below 1s", cfg.FenceTTL)
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
	return fmt.Errorf("%w: %s", backend.ErrInvalid, fmt.Sprintf(format, args...))
}

// Client returns the deployment's client, for adapters (asynq) that need
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

// lockKey is key's Redis key: redisproto.LockKey of the key without the
// Locker's prefix. A key without the prefix is bad input.
func (d *Driver) lockKey(key string) (string, error) {
	user, ok := strings.CutPrefix(key, d.prefix)
	if !ok {
		return "", errNoPrefix
	}
	return redisproto.LockKey(d.prefix, user), nil
}

var errNoPrefix = fmt.Errorf("%w: key without the driver's prefix", backend.ErrInvalid)

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
