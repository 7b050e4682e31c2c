package etcddriver

import (
	"context"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	invalidpkg "github.com/redfence/redfence/internal/invalid"
	"github.com/redfence/redfence/mutex/backend"
)

// Client is what a Driver needs of etcd: a *clientv3.Client has it all.
type Client interface {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
}

// Driver holds redfence locks in etcd: one key per lock (WithPrefix and
// the Locker's key), with a lease of its own, the key's create revision
// (+ WithTokenBase) as the fencing token. It implements backend.Backend,
// backend.Watcher, backend.Inspector, backend.SlotClaimer (package
// runner's slot claims) and backend.TermJournal (package election's terms,
// journal.go); give it to mutex.New. It is safe for concurrent use, by
// several Lockers too.
//
// The client is the caller's: the Driver never closes it. Close stops the
// Driver's watches.
type Driver struct {
	c    Client
	cfg  config
	ctx  context.Context
	stop context.CancelFunc

	now func() time.Time // time.Now; the tests' clock

	// Lock order: mu alone.
	mu      sync.Mutex
	pool    map[time.Duration][]lease // leases that hold no key, by the TTL of the locks they are for (lease.go)
	pooled  int                       // leases in pool
	closed  bool
	running int // watches; for the tests
	streams int // watches whose stream etcd created; for the tests
	// compacted counts the watches that found their revision compacted;
	// for the tests
	compacted int
	watches   sync.WaitGroup
	revoking  int // revokes in flight
	revokes   sync.WaitGroup
	keep      map[time.Duration]lease // leases of slot claims and records, by their data's TTL (slots.go)

	minLease atomic.Int64 // the server's least lease TTL, in seconds, once a grant showed it raised
}

var (
	_ backend.Backend     = (*Driver)(nil)
	_ backend.Watcher     = (*Driver)(nil)
	_ backend.Inspector   = (*Driver)(nil)
	_ backend.SlotClaimer = (*Driver)(nil)
)

// New returns a Driver over c. A nil c or a bad option returns an error
// matching ErrInvalid; nothing is sent to etcd.
func New(c Client, opts ...Option) (*Driver, error) {
	if c == nil || isNil(c) {
		return nil, invalid("nil client")
	}
	cfg, err := newConfig(opts)
	if err != nil {
		return nil, err
	}
	b := &Driver{c: c, cfg: cfg, now: time.Now, pool: map[time.Duration][]lease{}, keep: map[time.Duration]lease{}}
	b.ctx, b.stop = context.WithCancel(context.Background())
	return b, nil
}

func isNil(c Client) bool {
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

func invalid(format string, args ...any) error {
	return invalidpkg.Errorf("etcddriver", format, args...)
}

// Close stops every watch of the Driver and waits for them; later calls
// return ErrClosed. It revokes the leases it kept for later locks (no key is
// on them) and waits for the revokes it started, a few seconds at most when
// etcd does not answer. It does not close the client, nor release locks,
// nor revoke the leases of slot claims and run records (slots.go), which
// the other replicas rely on: they run out. It may be called again, and
// always returns nil.
func (b *Driver) Close() error {
	b.mu.Lock()
	b.closed = true
	pool := b.pool
	b.pool, b.pooled = map[time.Duration][]lease{}, 0
	b.mu.Unlock()
	b.stop()
	b.watches.Wait()
	b.drainPool(pool)
	b.revokes.Wait()
	return nil
}

// usable says why no call may go to etcd, or nil.
func (b *Driver) usable() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	return nil
}

// check validates a call's input before anything is sent.
func (b *Driver) check(key, owner string, needOwner bool) error {
	if err := b.usable(); err != nil {
		return err
	}
	switch {
	case key == "":
		return invalid("empty key")
	case strings.IndexByte(key, 0) >= 0:
		return invalid("key %q has a NUL byte", key)
	case needOwner && owner == "":
		return invalid("empty owner")
	case strings.IndexByte(owner, 0) >= 0:
		return invalid("owner %q has a NUL byte", owner)
	}
	return nil
}

// checkLease validates a Lease and returns it with its etcd key, and the
// create revision its token stands for.
func (b *Driver) checkLease(l backend.Lease, needTTL bool) (backend.Lease, int64, error) {
	if err := b.check(l.Key, l.Owner, true); err != nil {
		return l, 0, err
	}
	rev := l.Token - b.cfg.base
	if rev <= 0 {
		return l, 0, invalid("token %d is not above the token base %d", l.Token, b.cfg.base)
	}
	if needTTL && l.TTL <= 0 {
		return l, 0, invalid("TTL %v is not positive", l.TTL)
	}
	l.Key = b.name(l.Key)
	return l, rev, nil
}

// name is key's etcd key: the Driver's prefix on it. The methods of
// backend's interfaces take keys without it, check them, then name them.
func (b *Driver) name(key string) string { return b.cfg.prefix + key }

func (b *Driver) token(createRev int64) int64 { return createRev + b.cfg.base }

// revoke ends a lease this Driver granted and no longer needs; a failure
// only leaves it to expire.
func (b *Driver) revoke(ctx context.Context, id clientv3.LeaseID) {
	if id == clientv3.NoLease {
		return
	}
	_, _ = b.c.Revoke(ctx, id)
}

// leaseLeft is what the lease has left, in whole seconds rounded down
// (etcd tells no finer): 0 for a lease alive for under a second, negative
// for one gone, or no lease.
func (b *Driver) leaseLeft(ctx context.Context, id clientv3.LeaseID) (left time.Duration, granted int64, err error) {
	if id == clientv3.NoLease {
		return -1, 0, nil
	}
	r, err := b.c.TimeToLive(ctx, id)
	if err != nil {
		return 0, 0, err
	}
	if r.TTL < 0 {
		return -1, r.GrantedTTL, nil
	}
	return time.Duration(r.TTL) * time.Second, r.GrantedTTL, nil
}
