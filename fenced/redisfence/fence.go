package redisfence

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/typednil"
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
	err      error // configuration error, returned by Do
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
// shard's keys, fence and data, to another shard) or a bad option does not
// panic: Do returns an error matching ErrInvalid without a round trip.
func New(client Watcher, opts ...Option) *Fence {
	cfg := config{prefix: DefaultPrefix, attempts: DefaultAttempts}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	f := &Fence{client: client, err: cfg.err, cfg: cfg}
	switch {
	case client == nil:
		f.err = invalid("nil redis client")
	case typednil.Is(client):
		f.err = invalid("nil redis client: a nil %T", client)
	default:
		if _, ring := client.(*redis.Ring); ring {
			f.err = invalid("a *redis.Ring cannot fence: it sends a down shard's keys to another, which holds neither their fence nor their data")
		}
	}
	// A *redis.Client's Watch takes no keys, so Do sends WATCH in the same
	// round trip as the read of the fence. Clients that route by key
	// (Cluster) need the keys up front and send WATCH on its own.
	_, f.oneTrip = client.(*redis.Client)
	return f
}

// check returns the ErrInvalid Do reports for a Fence it cannot use, a nil
// ctx, or a resource or token outside the limits.
func (f *Fence) check(ctx context.Context, resource string, token int64) error {
	if err := f.usable(ctx); err != nil {
		return err
	}
	switch {
	case resource == "":
		return invalid("empty resource")
	case len(resource) > MaxResourceLen:
		return invalid("resource is %d bytes, over the limit of %d", len(resource), MaxResourceLen)
	case strings.IndexByte(resource, 0) >= 0:
		return invalid("resource has a NUL byte, which not every fenced store can hold")
	case !utf8.ValidString(resource):
		return invalid("resource is not valid UTF-8")
	case token < 0:
		return invalid("negative token %d", token)
	}
	return nil
}

// usable returns the ErrInvalid Do and DoAll report for a Fence they
// cannot use or a nil ctx.
func (f *Fence) usable(ctx context.Context) error {
	switch {
	case f == nil:
		return invalid("nil Fence")
	case f.err != nil:
		return f.err
	case f.client == nil:
		return invalid("zero Fence: make one with New")
	case ctx == nil:
		return invalid("nil context")
	}
	return nil
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
