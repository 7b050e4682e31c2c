package redisinspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// Config says which servers an Inspector reads and how its driver names
// and publishes. Every field but Addrs, Quorum and NoAnswer is required.
type Config struct {
	// Prefix is the driver's key prefix: the Redis key of a key is
	// redisproto.LockKey(Prefix, key).
	Prefix string
	// Servers hold the locks: one client (standalone, Sentinel or Cluster,
	// whose masters a listing scans one after another), or Redlock's
	// independent nodes, in the driver's order.
	Servers []redis.UniversalClient
	// Addrs names each server in NodeState, errors and cursors, by server;
	// "" (or missing) when unknown. A Cluster's masters are named by the
	// client.
	Addrs []string
	// Quorum is how many servers decide: 0 or 1 for one deployment,
	// Redlock's len(Servers)/2+1 otherwise.
	Quorum int
	// Publish is the command the force script wakes watchers with:
	// "PUBLISH", or "SPUBLISH" on Cluster; "" is PUBLISH.
	Publish string
	// Go runs fn on a goroutine the driver owns: its Close waits for it. A
	// call the caller stopped waiting for (its ctx ended) runs on there
	// until the client returns. Go must run every fn it is given.
	Go func(fn func())
	// NoAnswer, when set, is told of each call a server did not answer (a
	// timeout, a refused or broken connection; not a reply, nor a
	// caller's cancel): on Cluster the driver asks for a slot map reload,
	// since a hung master sends no MOVED.
	NoAnswer func(err error)
}

// Inspector is backend.Inspector over Redis: what the Redis drivers embed.
// It is safe for concurrent use, and holds no state of its own beyond cfg.
type Inspector struct {
	cfg   Config
	addrs []string // by server, "" when unknown
	err   error    // the Config's fault, returned by every method
}

var _ backend.Inspector = (*Inspector)(nil)

// New returns an Inspector over cfg. A bad Config is no panic: every method
// then returns an error matching backend.ErrInvalid that says what is
// wrong.
func New(cfg Config) *Inspector {
	in := &Inspector{cfg: cfg, err: checkConfig(cfg)}
	in.cfg.Publish = cmp.Or(cfg.Publish, "PUBLISH")
	in.addrs = make([]string, len(cfg.Servers))
	copy(in.addrs, cfg.Addrs)
	return in
}

func checkConfig(cfg Config) error {
	switch {
	case len(cfg.Servers) == 0:
		return invalid("redisinspect: no servers")
	case cfg.Go == nil:
		return invalid("redisinspect: Config.Go is nil: calls run on the driver's goroutines")
	case len(cfg.Addrs) > len(cfg.Servers):
		return invalid("redisinspect: %d addresses for %d servers", len(cfg.Addrs), len(cfg.Servers))
	case cfg.Quorum < 0 || cfg.Quorum > len(cfg.Servers):
		return invalid("redisinspect: quorum %d of %d servers", cfg.Quorum, len(cfg.Servers))
	case cfg.Quorum <= 1 && len(cfg.Servers) > 1:
		return invalid("redisinspect: %d servers without a quorum", len(cfg.Servers))
	case cfg.Publish != "" && cfg.Publish != "PUBLISH" && cfg.Publish != "SPUBLISH":
		return invalid("redisinspect: publish command %q is neither PUBLISH nor SPUBLISH", cfg.Publish)
	}
	for i, c := range cfg.Servers {
		if isNil(c) {
			return invalid("redisinspect: server %d is nil", i)
		}
	}
	return nil
}

// isNil reports whether c is nil, or a nil go-redis client in the
// interface.
func isNil(c redis.UniversalClient) bool {
	switch v := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return v == nil
	case *redis.ClusterClient:
		return v == nil
	case *redis.Ring:
		return v == nil
	}
	return false
}

// check refuses a call on a bad Inspector or without a context.
func (in *Inspector) check(ctx context.Context) error {
	switch {
	case in == nil:
		return invalid("redisinspect: nil Inspector")
	case in.err != nil:
		return in.err
	case ctx == nil:
		return invalid("nil context")
	}
	return nil
}

// redlock reports whether the servers decide by quorum.
func (in *Inspector) redlock() bool { return in.cfg.Quorum > 1 }

// split checks key and names its Redis key.
func (in *Inspector) split(key string) (user, name string, err error) {
	if key == "" {
		return "", "", invalid("empty key")
	}
	return key, redisproto.LockKey(in.cfg.Prefix, key), nil
}

// nodeName names node i in errors: its index, and its address when known.
func (in *Inspector) nodeName(i int) string {
	if in.addrs[i] == "" {
		return strconv.Itoa(i)
	}
	return strconv.Itoa(i) + " (" + in.addrs[i] + ")"
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{backend.ErrInvalid}, args...)...)
}

// unavailable marks err, a failure on the way to or on a server, as an
// outage (backend.ErrUnavailable) while keeping it for errors.Is/As.
func unavailable(err error) error {
	if err == nil || errors.Is(err, backend.ErrUnavailable) {
		return err
	}
	return &unavailableError{err}
}

type unavailableError struct{ err error }

func (e *unavailableError) Error() string {
	return backend.ErrUnavailable.Error() + ": " + e.err.Error()
}
func (e *unavailableError) Unwrap() []error { return []error{backend.ErrUnavailable, e.err} }
