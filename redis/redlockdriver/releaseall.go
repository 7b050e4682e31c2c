package redlockdriver

import (
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// ReleaseAll takes one count of each lease on every node, pipelined per
// node. It waits one node timeout (of the longest lease) for the nodes
// that granted any of the locks late to carry their tokens, and one more
// for the release, whatever the number of leases and however hung a node:
// at most twice the node timeout, also under a ctx without a deadline.
// The error, matching backend.ErrUnavailable, joins the nodes' errors when
// too many failed for a majority to have released (a hung node's calls end
// in the background; Close waits for them).
func (d *Driver) ReleaseAll(ctx context.Context, leases []backend.Lease) error {
	if ctx == nil {
		return invalid("nil context")
	}
	var ttl time.Duration
	calls := make([]redisproto.Call, len(leases))
	holds := make([]*hold, len(leases))
	for j, l := range leases {
		if err := d.checkLease(ctx, l); err != nil {
			return err
		}
		holds[j] = holdOf(l)
		ttl = max(ttl, leaseTTL(l, holds[j]))
		calls[j] = redisproto.Call{Keys: []string{d.name(l.Key)}, Args: releaseArgs(l.Owner, holds[j].token, holds[j].lease)}
	}
	if len(leases) == 0 {
		return nil
	}
	timeout := d.nodeTimeoutFor(ttl)
	// One deadline for every hold: a timer's channel fires once, and would
	// leave the holds after the first unsettled one waiting for theirs.
	settle, stopSettle := context.WithTimeout(ctx, timeout)
	for _, h := range holds {
		h.awaitSettled(settle)
	}
	stopSettle()
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	replies := d.fanout(rctx, timeout, allNodes(len(d.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		_, err := redisproto.RunScripts(ctx, c, redisproto.ReleaseScript, calls, nil)
		return nil, err
	})
	var errs []error
	for _, r := range replies {
		if r.err != nil && !errors.Is(r.err, redis.Nil) {
			errs = append(errs, r.err)
		}
	}
	if len(errs) > len(d.nodes)-d.quorum {
		return unavailable(ctx, errors.Join(errs...))
	}
	return nil
}
