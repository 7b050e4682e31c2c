package redlockdriver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// Extend sets each lease to its TTL on every node, pipelined per node, in
// one round trip bounded by the node timeout of the shortest TTL. A lease
// is Renewed when a majority extended it within its validity (TTL −
// elapsed − drift), Gone when a majority said it is not the holder's (or
// too few could still confirm), and Unknown otherwise; the error, matching
// backend.ErrUnavailable, says node by node what kept the Unknown ones from
// a majority, and is nil when none is Unknown.
func (d *Driver) Extend(ctx context.Context, leases []backend.Lease) ([]backend.Renewal, error) {
	if ctx == nil {
		return nil, invalid("nil context")
	}
	ttls := make([]time.Duration, len(leases))
	calls := make([]redisproto.Call, len(leases))
	for j, l := range leases {
		if err := d.checkLease(ctx, l); err != nil {
			return nil, err
		}
		if l.TTL <= 0 {
			return nil, invalid("TTL %v is not positive", l.TTL)
		}
		ttls[j] = l.TTL
		calls[j] = redisproto.Call{Keys: []string{d.name(l.Key)}, Args: []any{l.Owner, holdOf(l).token, l.TTL.Milliseconds(), d.keyTTL(l.TTL)}}
	}
	if len(leases) == 0 {
		return []backend.Renewal{}, nil
	}
	sent := d.now()
	replies := d.fanout(ctx, d.nodeTimeoutFor(slices.Min(ttls)), allNodes(len(d.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		cmds, err := redisproto.RunScripts(ctx, c, redisproto.ExtendScript, calls, nil) // each command's own reply says how it went
		return redisproto.ReplyInts(cmds), err
	})
	results := make([]backend.Renewal, len(leases))
	unknown := false
	for j := range leases {
		results[j] = d.renewal(replies, j, ttls[j], leases[j].Drift, sent)
		unknown = unknown || results[j] == backend.Unknown
	}
	if !unknown {
		return results, nil
	}
	return results, d.noMajority(ctx, replies)
}

// renewal counts the nodes' answers for lease j, sent at sent.
func (d *Driver) renewal(replies []nodeReply, j int, ttl, drift time.Duration, sent time.Time) backend.Renewal {
	yes, no := 0, 0
	for _, r := range replies {
		if r.vals == nil || j >= len(r.vals) {
			continue
		}
		switch r.vals[j] {
		case 1:
			yes++
		case 0:
			no++
		}
	}
	valid := ttl-d.now().Sub(sent)-drift > 0
	switch {
	case yes >= d.quorum && valid:
		return backend.Renewed
	case no > len(d.nodes)-d.quorum:
		return backend.Gone // a majority can no longer confirm
	}
	return backend.Unknown
}

// noMajority says why an extension found no majority: the nodes' errors,
// or the validity that ran out.
func (d *Driver) noMajority(ctx context.Context, replies []nodeReply) error {
	var errs []error
	for i, r := range replies {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", d.nodeName(i), r.err))
		}
	}
	if len(errs) == 0 {
		return unavailable(ctx, fmt.Errorf("%w in time: the validity ran out", errNoMajority))
	}
	return unavailable(ctx, fmt.Errorf("%w: %w", errNoMajority, errors.Join(errs...)))
}

// TTL is the lease a majority still guarantees: the quorum-th longest
// remaining lease over the nodes that hold l; -1 when too few hold it for
// a majority, and an error matching backend.ErrUnavailable when the nodes
// that failed to answer leave it unknown.
func (d *Driver) TTL(ctx context.Context, l backend.Lease) (time.Duration, error) {
	if err := d.checkLease(ctx, l); err != nil {
		return 0, err
	}
	h := holdOf(l)
	keys := []string{d.name(l.Key)}
	replies := d.fanout(ctx, d.nodeTimeoutFor(leaseTTL(l, h)), allNodes(len(d.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		n, err := redisproto.TTLScript.Run(ctx, c, keys, l.Owner, h.token).Int64()
		return []int64{n}, err
	})
	var left []int64
	var errs []error
	for _, r := range replies {
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.vals[0] >= 0:
			left = append(left, r.vals[0])
		}
	}
	if len(left) >= d.quorum {
		slices.Sort(left)
		slices.Reverse(left)
		return time.Duration(left[d.quorum-1]) * time.Microsecond, nil
	}
	if len(left)+len(errs) >= d.quorum {
		return 0, unavailable(ctx, errors.Join(errs...)) // cannot tell
	}
	return -1, nil
}
