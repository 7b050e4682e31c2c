package redlockdriver

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

// Release takes one count of l on every node that carries its token now,
// and, in the background, on those still answering its acquisition once
// they have (their settlement). It returns the largest count left (0:
// freed), -1 when no node held the lock, or an error matching
// backend.ErrUnavailable when no node confirmed and some failed. It
// returns once a majority freed the lock, or at the node timeout; the
// other nodes finish in the background. A second Release of the same
// lock, a retry after an error, goes to the first one's nodes only.
func (d *Driver) Release(ctx context.Context, l backend.Lease) (int64, error) {
	if err := d.checkLease(ctx, l); err != nil {
		return 0, err
	}
	h := holdOf(l)
	now, later := h.forRelease(len(d.nodes))
	n, err := d.release(ctx, l, h, now)
	if len(later) > 0 {
		d.releaseLate(l, h, later)
	}
	return n, err
}

// release takes one count on nodes.
func (d *Driver) release(ctx context.Context, l backend.Lease, h *hold, nodes []int) (int64, error) {
	// Done once a majority released: no quorum can form for the old holder
	// any more, and the other nodes finish in the background.
	decided := func(out []nodeReply, answered []bool) bool {
		freed := 0
		for i, r := range out {
			if answered[i] && r.err == nil && len(r.vals) == 1 && r.vals[0] == 0 {
				freed++
			}
		}
		return freed >= d.quorum
	}
	replies := d.fanoutUntil(ctx, d.nodeTimeoutFor(leaseTTL(l, h)), nodes, d.releaseCall(l, h), decided)
	left := int64(-1)
	var errs []error
	for _, i := range nodes {
		r := replies[i]
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		left = max(left, r.vals[0])
	}
	if left < 0 && len(errs) > 0 {
		return 0, unavailable(ctx, errors.Join(errs...))
	}
	return left, nil
}

// releaseCall is one node's release of l.
func (d *Driver) releaseCall(l backend.Lease, h *hold) nodeCall {
	keys, args := []string{d.name(l.Key)}, releaseArgs(l.Owner, h.token, h.lease)
	return func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		n, err := redisproto.ReleaseScript.Run(ctx, c, keys, args...).Int64()
		return []int64{n}, err
	}
}

// leaseTTL is the lease a call about l is timed by: the one it is renewed
// to when the Locker says, else the one it was acquired for.
func leaseTTL(l backend.Lease, h *hold) time.Duration {
	if l.TTL > 0 {
		return l.TTL
	}
	return h.lease
}

// releaseLate releases l, in the background, on nodes that granted it
// after the quorum was reached, once they carry its token (see forRelease).
// Each node is released once: a second release would take a second count
// of a re-entered lock.
func (d *Driver) releaseLate(l backend.Lease, h *hold, nodes []int) {
	d.run.Go(func() {
		t := time.NewTimer(redisrt.CleanupTimeout)
		defer t.Stop()
		select {
		case <-h.settled: // later nodes: a hold with late ones
		case <-t.C:
			return
		}
		// A node timeout, as every Redlock call: a node that does not
		// answer (paused) must not pile up calls of a cleanup's length.
		timeout := d.nodeTimeoutFor(leaseTTL(l, h))
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		d.fanout(ctx, timeout, nodes, d.releaseCall(l, h))
	})
}
