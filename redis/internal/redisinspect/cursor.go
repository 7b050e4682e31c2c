package redisinspect

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/backend"
)

// maxCursorLen bounds a cursor: one List returns is far shorter.
const maxCursorLen = 512

// listCursor is where a listing stands: the shard, SCAN's cursor on it,
// and the Redlock nodes it skipped so far. Its text form,
// "shard:cursor:skipped:addr", names the shard's server, so that a cursor
// is refused once the servers changed; skipped lists node indices joined
// by ".", "" for none.
type listCursor struct {
	shard   int
	cursor  uint64
	skipped []int // increasing, each below shard
	addr    string
}

// skip moves past the current shard, a Redlock node that did not answer.
func (c *listCursor) skip() {
	c.skipped = append(c.skipped, c.shard)
	c.shard, c.cursor = c.shard+1, 0
}

func (c listCursor) String(shards []scanShard) string {
	skipped := make([]string, len(c.skipped))
	for i, s := range c.skipped {
		skipped[i] = strconv.Itoa(s)
	}
	return strconv.Itoa(c.shard) + ":" + strconv.FormatUint(c.cursor, 10) + ":" + strings.Join(skipped, ".") + ":" + shards[c.shard].addr
}

// badCursor is an error matching backend.ErrBadCursor.
func badCursor(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{backend.ErrBadCursor}, args...)...)
}

// parseCursor reads a cursor List returned. It allocates in proportion to
// the text, whatever numbers it holds: a request may carry one.
func parseCursor(s string) (listCursor, error) {
	var c listCursor
	if s == "" {
		return c, nil
	}
	if len(s) > maxCursorLen {
		return c, badCursor("cursor of %d bytes", len(s))
	}
	bad := badCursor("%q", s)
	parts := strings.SplitN(s, ":", 4)
	if len(parts) != 4 {
		return c, bad
	}
	var err1, err2 error
	c.shard, err1 = strconv.Atoi(parts[0])
	c.cursor, err2 = strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || c.shard < 0 {
		return c, bad
	}
	if parts[2] != "" {
		for i := range strings.SplitSeq(parts[2], ".") {
			n, err := strconv.Atoi(i)
			if err != nil || n < 0 || n >= c.shard || len(c.skipped) > 0 && n <= c.skipped[len(c.skipped)-1] {
				return c, bad // indices increase, and name shards already passed
			}
			c.skipped = append(c.skipped, n)
		}
	}
	c.addr = parts[3]
	return c, nil
}

// fits checks a parsed cursor (text, as given) against the shards now.
func (c listCursor) fits(text string, shards []scanShard) error {
	if text == "" {
		return nil
	}
	if c.shard >= len(shards) { // a finished listing's cursor is "", never this
		return badCursor("%q names shard %d of %d", text, c.shard, len(shards))
	}
	if c.addr != shards[c.shard].addr {
		// A SCAN cursor means nothing on another server: after a failover
		// or a resharding the listing starts again.
		return badCursor("%q is for %s, and shard %d is now %s: the servers changed, start the listing again", text, c.addr, c.shard, shards[c.shard].addr)
	}
	return nil
}

// scanShard is one server to SCAN: a standalone or Sentinel-managed server,
// one master of a Cluster, or one Redlock node.
type scanShard struct {
	c    redis.Cmdable
	addr string
}

// shards lists the servers' shards in a stable order (Cluster masters by
// address), so that a cursor's shard index means the same in the next call
// while the topology stays.
func (in *Inspector) shards(ctx context.Context) ([]scanShard, error) {
	var out []scanShard
	for i, c := range in.cfg.Servers {
		cc, ok := c.(*redis.ClusterClient)
		if !ok {
			addr := in.addrs[i]
			if rc, ok := c.(*redis.Client); ok && addr == "" {
				addr = rc.Options().Addr
			}
			out = append(out, scanShard{c: c, addr: addr})
			continue
		}
		var mu sync.Mutex
		var masters []scanShard
		err := cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			mu.Lock()
			masters = append(masters, scanShard{c: m, addr: m.Options().Addr})
			mu.Unlock()
			return nil
		})
		if err != nil {
			return nil, err
		}
		slices.SortFunc(masters, func(a, b scanShard) int { return strings.Compare(a.addr, b.addr) })
		out = append(out, masters...)
	}
	return out, nil
}
