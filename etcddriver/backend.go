package etcddriver

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/redfence/redfence/mutex/backend"
)

// Client is what a Backend needs of etcd: a *clientv3.Client has it all.
type Client interface {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
}

// Backend holds redfence locks in etcd: one key per lock, with a lease of
// its own, the key's create revision (+ WithTokenBase) as the fencing
// token. It implements backend.Backend, backend.Watcher,
// backend.Inspector, backend.SlotClaimer (package runner's slot claims)
// and backend.TermJournal (package election's terms, journal.go);
// give it to mutex.NewWithBackend. It is safe for concurrent use, by several
// Lockers too.
//
// The client is the caller's: the Backend never closes it. Close stops the
// Backend's watches.
type Backend struct {
	c    Client
	cfg  config
	err  error // bad configuration: every call returns it
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
	_ backend.Backend     = (*Backend)(nil)
	_ backend.Watcher     = (*Backend)(nil)
	_ backend.Inspector   = (*Backend)(nil)
	_ backend.SlotClaimer = (*Backend)(nil)
)

// New returns a Backend over c. A nil c or a bad option makes every call
// return an error wrapping ErrInvalid, without a request.
func New(c Client, opts ...Option) *Backend {
	b := &Backend{c: c, now: time.Now, pool: map[time.Duration][]lease{}, keep: map[time.Duration]lease{}}
	for _, o := range opts {
		if o != nil {
			o.apply(&b.cfg)
		}
	}
	switch {
	case c == nil || isNil(c):
		b.err = fmt.Errorf("%w: nil client", ErrInvalid)
	case b.cfg.base < 0:
		b.err = fmt.Errorf("%w: token base %d is negative", ErrInvalid, b.cfg.base)
	}
	b.ctx, b.stop = context.WithCancel(context.Background())
	return b
}

func isNil(c Client) bool {
	v := reflect.ValueOf(c)
	return v.Kind() == reflect.Pointer && v.IsNil()
}

// Close stops every watch of the Backend and waits for them; later calls
// return ErrClosed. It revokes the leases it kept for later locks (no key is
// on them) and waits for the revokes it started, a few seconds at most when
// etcd does not answer. It does not close the client, nor release locks,
// nor revoke the leases of slot claims and run records (slots.go), which
// the other replicas rely on: they run out.
func (b *Backend) Close() error {
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
func (b *Backend) usable() error {
	if b.err != nil {
		return b.err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	return nil
}

// check validates a call's input before anything is sent.
func (b *Backend) check(key, owner string, needOwner bool) error {
	if err := b.usable(); err != nil {
		return err
	}
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: key %q has a NUL byte", ErrInvalid, key)
	case needOwner && owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalid)
	case strings.IndexByte(owner, 0) >= 0:
		return fmt.Errorf("%w: owner %q has a NUL byte", ErrInvalid, owner)
	}
	return nil
}

// checkLease validates a Lease and returns the create revision its token
// stands for.
func (b *Backend) checkLease(l backend.Lease, needTTL bool) (int64, error) {
	if err := b.check(l.Key, l.Owner, true); err != nil {
		return 0, err
	}
	rev := l.Token - b.cfg.base
	if rev <= 0 {
		return 0, fmt.Errorf("%w: token %d is not above the token base %d", ErrInvalid, l.Token, b.cfg.base)
	}
	if needTTL && l.TTL <= 0 {
		return 0, fmt.Errorf("%w: TTL %v is not positive", ErrInvalid, l.TTL)
	}
	return rev, nil
}

func (b *Backend) token(createRev int64) int64 { return createRev + b.cfg.base }

// revoke ends a lease this Backend granted and no longer needs; a failure
// only leaves it to expire.
func (b *Backend) revoke(ctx context.Context, id clientv3.LeaseID) {
	if id == clientv3.NoLease {
		return
	}
	_, _ = b.c.Revoke(ctx, id)
}

// leaseLeft is what the lease has left, in whole seconds rounded down
// (etcd tells no finer): 0 for a lease alive for under a second, negative
// for one gone, or no lease.
func (b *Backend) leaseLeft(ctx context.Context, id clientv3.LeaseID) (left time.Duration, granted int64, err error) {
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
