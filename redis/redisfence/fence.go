package redisfence

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/fenced/fence"
)

// Watcher runs fn with a transaction that has WATCHed keys, as go-redis's
// clients do: *redis.Client (standalone, or Sentinel from
// NewFailoverClient), *redis.ClusterClient and any redis.UniversalClient
// satisfy it. So does *redis.Ring, which New refuses (see the package doc).
type Watcher interface {
	Watch(ctx context.Context, fn func(*redis.Tx) error, keys ...string) error
}

// Fence records, in Redis beside the data, the highest token accepted per
// resource, and applies a write to the resource's keys only if its token is
// not lower. It is safe for concurrent use, holds no connection of its own
// and owns no goroutines, so there is nothing to close.
type Fence struct {
	client   Watcher
	cfg      config
	oneTrip  bool // see New
	mutation mutation
}

// mutation switches off a part of Do's atomic step, for the test that
// shows the concurrency test catches its absence (export_test.go). Zero in
// every Fence New returns.
type mutation struct {
	skipFenceWatch bool
}

// New returns a Fence over client. A nil client, a typed nil one (a nil
// *redis.Client in the interface), a *redis.Ring (which moves a down
// shard's keys, fence and data, to another shard) or a bad option returns
// an error matching ErrInvalid, without a round trip.
func New(client Watcher, opts ...Option) (*Fence, error) {
	cfg := config{prefix: DefaultPrefix, attempts: DefaultAttempts}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := fence.Required("redis client", client); err != nil {
		return nil, err
	}
	if _, ring := client.(*redis.Ring); ring {
		return nil, invalid("a *redis.Ring cannot fence: it sends a down shard's keys to another, which holds neither their fence nor their data")
	}
	if cfg.err != nil {
		return nil, cfg.err
	}
	f := &Fence{client: client, cfg: cfg}
	// A *redis.Client's Watch takes no keys, so Do sends WATCH in the same
	// round trip as the read of the fence. Clients that route by key
	// (Cluster) need the keys up front and send WATCH on its own.
	_, f.oneTrip = client.(*redis.Client)
	return f, nil
}

// usable returns the ErrInvalid Do and DoAll report before any round trip
// for a Fence they cannot use, a nil ctx or a claim outside the limits
// (fence.Usable).
func (f *Fence) usable(ctx context.Context, claims ...Claim) error {
	return fence.Usable(ctx, "Fence", f == nil, f != nil && f.client != nil, claims...)
}

// sameSlot checks that every key hashes to the fence key's Cluster slot.
func sameSlot(fence, resource string, keys []string) error {
	want := slot(fence)
	for _, k := range keys {
		if s := slot(k); s != want {
			return invalid("key %q hashes to slot %d, the fence of resource %q to slot %d: put Tag(resource), %q, in the key",
				clip(k), s, clip(resource), want, clip(Tag(resource)))
		}
	}
	return nil
}
