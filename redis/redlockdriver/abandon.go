package redlockdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/redis/internal/redisproto"
	"github.com/redfence/redfence/redis/internal/redisrt"
)

// giveBack releases a failed attempt's partial acquisitions: exactly (owner
// and token) on the nodes that granted it; on nodes that did not answer,
// after their call ended, by owner, when the owner id is the attempt's own
// (a shared owner id may hold the lock elsewhere; its lease runs out
// instead).
func (d *Driver) giveBack(lockKey, owner string, shared bool, voters []int, tokens []int64, replies []nodeReply) {
	keys := []string{lockKey, redisproto.ChannelOf(lockKey)}
	for _, i := range voters {
		c, tok := d.nodes[i], strconv.FormatInt(tokens[i], 10)
		d.run.Afterward(nil, func(ctx context.Context) {
			_ = redisproto.ReleaseScript.Run(ctx, c, keys[:1], releaseArgs(owner, tok, 0)...).Err()
		})
	}
	if shared {
		return
	}
	for i, r := range replies {
		if r.pending == nil {
			continue
		}
		c := d.nodes[i]
		d.run.Afterward(r.pending, func(ctx context.Context) {
			_ = redisproto.AbandonScript.Run(ctx, c, keys, owner, d.keyTTL(0), "PUBLISH").Err()
		})
	}
}

// Abandon frees key on every node where owner holds it, whatever the
// count, and wakes its watchers there. It waits for every node until ctx
// ends (at most the clean-up timeout, for a ctx without a deadline), and
// returns the errors of the nodes that did not answer, matching
// backend.ErrUnavailable: the lock may stay on those until its lease runs
// out. An attempt this driver refused already gave back what it took; the
// Locker's Abandon after it finds nothing.
func (d *Driver) Abandon(ctx context.Context, key, owner string) error {
	if err := d.checkKey(key); err != nil {
		return err
	}
	switch {
	case ctx == nil:
		return invalid("nil context")
	case owner == "":
		return invalid("empty owner")
	}
	lockKey := d.name(key)
	keys := []string{lockKey, redisproto.ChannelOf(lockKey)}
	timeout := redisrt.CleanupTimeout
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	replies := d.fan(ctx, timeout, allNodes(len(d.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		return nil, redisproto.AbandonScript.Run(ctx, c, keys, owner, d.keyTTL(0), "PUBLISH").Err()
	}, nil, false)
	var errs []error
	for i, r := range replies {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", d.nodeName(i), r.err))
		}
	}
	return unavailable(ctx, errors.Join(errs...))
}
