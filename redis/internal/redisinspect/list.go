package redisinspect

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/internal/glob"
	"github.com/redfence/redfence/mutex/backend"
	"github.com/redfence/redfence/redis/internal/redisproto"
)

// List scans the servers for lock keys under r.Prefix that match r.Match
// and reads them: every master of a Cluster, every Redlock node, one shard
// after another. One call makes at most r.Scans SCAN round trips and one
// more to read the keys it found (on every Redlock node at once); free keys
// are returned too, without their forced releases (Inspect shows them).
// SCAN's guarantees apply: a key present for the whole listing is found at
// least once. A cursor names the server it continues on: after a failover
// or a resharding it is refused (backend.ErrBadCursor), and the listing
// starts again. Reads are read-only scripts, as Inspect's.
//
// Every Redlock call reads from every node, whether it found keys or not:
// when fewer than a quorum answer, it fails with an error matching
// backend.ErrUnavailable, never an empty page; when a quorum answers but
// not all, the page is partial and ListPage.Skipped says why. A node whose
// SCAN hangs gets its share of ctx's deadline, so that it is skipped
// rather than the whole page. A failed call's page has only its RoundTrips.
func (in *Inspector) List(ctx context.Context, r backend.ListRequest) (backend.ListPage, error) {
	return in.list(ctx, r, false)
}

// list is List, and with holds ListHolds.
func (in *Inspector) list(ctx context.Context, r backend.ListRequest, holds bool) (backend.ListPage, error) {
	r, err := in.checkList(ctx, r)
	if err != nil {
		return backend.ListPage{}, err
	}
	at, err := parseCursor(r.Cursor)
	if err != nil {
		return backend.ListPage{}, err
	}
	shards, err := in.shards(ctx)
	if err != nil {
		return backend.ListPage{}, unavailable(err)
	}
	if err := at.fits(r.Cursor, shards); err != nil {
		return backend.ListPage{}, err
	}
	var page backend.ListPage
	first := at.shard
	found, err := in.scanPage(ctx, &page, shards, &at, r, holds)
	if err != nil {
		return backend.ListPage{RoundTrips: page.RoundTrips}, err
	}
	if at.shard < len(shards) {
		page.Cursor = at.String(shards)
	}
	locks, sems, rws := byKind(found)
	if err := in.readPage(ctx, &page, locks, at.skipped, first); err != nil {
		return backend.ListPage{RoundTrips: page.RoundTrips}, err
	}
	if len(sems)+len(rws) > 0 {
		if err := in.readHolds(ctx, &page, sems, rws); err != nil {
			return backend.ListPage{RoundTrips: page.RoundTrips}, err
		}
	}
	return page, nil
}

// checkList refuses a bad ListRequest and fills in the defaults of the
// fields left zero (Scans 10, Count 1000, Match all).
func (in *Inspector) checkList(ctx context.Context, r backend.ListRequest) (backend.ListRequest, error) {
	if err := in.check(ctx); err != nil {
		return r, err
	}
	switch {
	case r.Scans < 0 || r.Scans > 1000:
		return r, invalid("Scans %d is outside 1..1000", r.Scans)
	case r.Count < 0 || r.Count > 100000:
		return r, invalid("Count %d is outside 1..100000", r.Count)
	case r.Limit < 0:
		return r, invalid("negative Limit %d", r.Limit)
	}
	r.Scans = cmp.Or(r.Scans, 10)
	r.Count = cmp.Or(r.Count, 1000)
	r.Match = cmp.Or(r.Match, "*")
	return r, nil
}

// foundKey is a key a SCAN found, and the shard it was found on.
type foundKey struct {
	// key: as the caller names it; name: its lock key in Redis, which a
	// semaphore's or a read-write lock's keys are named after
	key, name string
	shard     int
	kind      keyKind
}

// byKind splits found into its locks, semaphores and read-write locks.
func byKind(found []foundKey) (locks, sems, rws []foundKey) {
	for _, f := range found {
		switch f.kind {
		case semaphoreKind:
			sems = append(sems, f)
		case rwKind:
			rws = append(rws, f)
		default:
			locks = append(locks, f)
		}
	}
	return locks, sems, rws
}

// scanPage makes up to r.Scans SCAN calls from at on, moving at along, and
// returns the lock keys found that match r.Match, and with holds the
// semaphores and read-write locks, each once. A Redlock node that fails
// is skipped (the listing goes on without it, and says so); any other
// server's failure ends the call.
func (in *Inspector) scanPage(ctx context.Context, page *backend.ListPage, shards []scanShard, at *listCursor, r backend.ListRequest, holds bool) ([]foundKey, error) {
	var found []foundKey
	seen := map[foundKey]bool{} // by key and kind: a semaphore has several keys
	match := glob.Escape(in.cfg.Prefix) + "{*"
	for scans := 0; scans < r.Scans && at.shard < len(shards) && (r.Limit == 0 || len(found) < r.Limit); scans++ {
		// The call's own variables: one the caller stopped waiting for
		// (pending) may still write them, and they are then never read.
		var got []string
		var next uint64
		sh, from := shards[at.shard], at.cursor
		callCtx, cancel := in.nodeShare(ctx, len(shards)-at.shard)
		pending, err := in.interruptible(callCtx, func(ctx context.Context) error {
			var scan *redis.ScanCmd
			if holds {
				scan = sh.c.Scan(ctx, from, match, int64(r.Count))
			} else {
				scan = sh.c.ScanType(ctx, from, match, int64(r.Count), "string")
			}
			k, n, err := scan.Result()
			got, next = k, n
			return err
		})
		cancel()
		page.RoundTrips++
		if err != nil && in.redlock() && ctx.Err() == nil {
			// A node down: every lock a quorum holds is on the others.
			page.Skipped = append(page.Skipped, fmt.Errorf("scan node %s: %w", in.nodeName(at.shard), err))
			at.skip()
			continue
		}
		if err != nil {
			return nil, unavailable(fmt.Errorf("scan %s: %w", sh.addr, err))
		}
		if pending == nil {
			at.cursor = next
		}
		for _, name := range got {
			key, lockName, kind, ok := kindOf(in.cfg.Prefix, name, holds)
			if once := (foundKey{key: key, kind: kind}); ok && glob.Match(r.Match, key) && !seen[once] {
				seen[once] = true
				found = append(found, foundKey{key: key, name: lockName, shard: at.shard, kind: kind})
			}
		}
		if at.cursor == 0 {
			at.shard++
		}
	}
	return found, nil
}

// nodeShare bounds one Redlock node's SCAN to its share of what is left of
// ctx, with the nodes still to scan and the read after them, so that a hung
// node is skipped, not the whole page; one deployment's server gets all of it.
func (in *Inspector) nodeShare(ctx context.Context, nodesLeft int) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !in.redlock() || !ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Until(dl)/time.Duration(nodesLeft+1))
}

// readPage reads every key found in one pipelined round trip per server,
// all servers at once, and adds their states to page. Redlock reads every
// node even when nothing was found: fewer than a quorum answering is an
// error, not an empty page. skipped are the Redlock nodes the listing could
// not scan, whose keys it lists where the other nodes hold them; this page
// began at shard first, and those it skipped are not asked again.
func (in *Inspector) readPage(ctx context.Context, page *backend.ListPage, found []foundKey, skipped []int, first int) error {
	if len(found) == 0 && !in.redlock() {
		return nil
	}
	calls := make([]redisproto.Call, len(found))
	for i, n := range found {
		calls[i] = redisproto.Call{Keys: []string{n.name, redisproto.QueueOf(n.name), redisproto.AuditOf(n.name)}, Args: []any{inspectWaiters, 0}}
	}
	replies, serverErrs := eachServer(in, ctx, func(ctx context.Context, s int, c redis.UniversalClient) ([]*redis.Cmd, error) {
		if s >= first && slices.Contains(skipped, s) {
			return nil, errSkipped // it failed its SCAN just now: not waited for again
		}
		if len(calls) == 0 {
			return nil, c.Ping(ctx).Err()
		}
		return readScripts(ctx, c, redisproto.InspectScript, calls)
	})
	page.RoundTrips++
	if err := in.quorumAnswered(serverErrs); err != nil {
		return err
	}
	for s, err := range serverErrs {
		if err != nil && err != errSkipped { // (said once a page)
			page.Skipped = append(page.Skipped, fmt.Errorf("read node %s: %w", in.nodeName(s), err))
		}
	}
	views := viewsByKey(len(found), replies, serverErrs)
	for i, n := range found {
		if in.redlock() && listedEarlier(views[i][:n.shard], skipped) {
			continue
		}
		st, err := in.viewOf(n.key, n.name, views[i])
		if err != nil {
			if !in.redlock() {
				if wrongType(err) {
					continue // a key of another type under a lock's name: not a lock
				}
				return err
			}
			page.Skipped = append(page.Skipped, fmt.Errorf("read %q: %w", n.key, err))
			continue
		}
		page.Keys = append(page.Keys, st)
	}
	return nil
}

// quorumAnswered fails unless enough servers answered a listing's read:
// one of one deployment's, a quorum of Redlock's nodes.
func (in *Inspector) quorumAnswered(errs []error) error {
	if !in.redlock() {
		return unavailable(errs[0]) // nil when it answered
	}
	var failed []error
	for s, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("node %s: %w", in.nodeName(s), err))
		}
	}
	if answered := len(errs) - len(failed); answered < in.cfg.Quorum {
		return unavailable(fmt.Errorf("list: %d of %d nodes answered, %d needed: %w", answered, len(errs), in.cfg.Quorum, errors.Join(failed...)))
	}
	return nil
}

// viewsByKey arranges the servers' replies by key, then by server; a
// server's failure is each of its keys' error.
func viewsByKey(keys int, replies [][]*redis.Cmd, errs []error) [][]nodeView {
	views := make([][]nodeView, keys)
	for i := range views {
		views[i] = make([]nodeView, len(replies))
		for s, cmds := range replies {
			v, err := nodeView{}, errs[s]
			if i < len(cmds) {
				if v, err = readView(cmds[i]); err == nil && errs[s] != nil && !errors.Is(errs[s], redis.Nil) {
					err = errs[s]
				}
			}
			v.err = err
			views[i][s] = v
		}
	}
	return views
}

// listedEarlier: a Redlock key found on a node is listed there once, so a
// later node that finds it again skips it; a node the listing could not
// scan listed nothing.
func listedEarlier(earlier []nodeView, skipped []int) bool {
	for j, v := range earlier {
		if v.err == nil && v.value != "" && !slices.Contains(skipped, j) {
			return true
		}
	}
	return false
}

// errSkipped: a Redlock node this page did not ask again.
var errSkipped = errors.New("skipped: it did not answer its SCAN")
