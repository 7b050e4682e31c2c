package mutex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// ListOptions bound one List call.
type ListOptions struct {
	// Match is a Redis glob (*, ?, [...], \ escapes) over keys as given to
	// Lock; "" matches all.
	Match string
	// Cursor continues a listing: the Cursor of the Page before; "" starts
	// one.
	Cursor string
	// Scans bounds the SCAN calls of this List call, 1 to 1000; default 10.
	Scans int
	// Count is SCAN's COUNT, the keys a SCAN call looks at, 1 to 100000;
	// default 1000.
	Count int
	// Free includes keys nobody holds that still keep their fencing
	// counter; by default a listing shows held and reserved keys only.
	Free bool
	// Limit ends a page's scanning once it found Limit lock keys: it reads
	// them, and all that its last SCAN returned, so that no key is passed
	// over; 0, the default, scans o.Scans times. A first screen of a large
	// listing then reads about what it shows.
	Limit int
}

// Page is one List call's part of a listing.
type Page struct {
	Locks []LockInfo // in the order they were found
	// Cursor continues the listing; "" once every server was scanned whole.
	Cursor string
	// RoundTrips is the number of round trips this call made, counting
	// calls to several servers at once as one.
	RoundTrips int
	// Skipped says why this page is partial: the Redlock nodes it could
	// not scan or read, and the keys too few nodes answered for. A
	// majority still answered (else List fails), but a lock held on a
	// skipped node may be missing from the page or shown free. Empty for
	// a whole page.
	Skipped []error
}

// List scans the servers for lock keys that match o.Match and inspects
// them: every master of a Cluster, every Redlock node, one shard after
// another. One call makes at most o.Scans SCAN round trips and one more to
// read the locks it found (on every Redlock node at once), so a listing of
// K keys costs about K/o.Count SCANs plus one read per call, whatever
// share of them are locks; pass Page.Cursor back for the next part. A
// failed call's Page has only its RoundTrips. SCAN's
// guarantees apply: a key present for the whole listing is found at least
// once; keys that come and go meanwhile may or may not be. A cursor names
// the server it continues on: after a failover or a resharding it is
// refused (ErrInvalid), and the listing starts again. Waiters are
// listed, forced releases are not (Inspect shows them). Reads are
// read-only scripts (EVALSHA_RO where the server has it), which a CLIENT
// PAUSE WRITE does not hold.
//
// Every Redlock call reads from every node, whether it found keys or not:
// when fewer than a quorum answer, it fails with an error matching
// ErrUnavailable, never an empty page; when a quorum answers but not all,
// the page is partial and Page.Skipped says why. An outside backend
// (NewWithBackend) lists through backend.Inspector, one page of o.Count keys
// a round trip, its cursor the backend's; without one, List returns an
// error matching errors.ErrUnsupported.
func (l *Locker) List(ctx context.Context, o ListOptions) (Page, error) {
	o, err := l.checkList(ctx, o)
	if err != nil {
		return Page{}, err
	}
	if l.insp != nil {
		return l.listVia(ctx, o)
	}
	servers := l.servers()
	if servers == nil {
		return Page{}, errInspectUnsupported
	}
	at, err := parseCursor(o.Cursor)
	if err != nil {
		return Page{}, err
	}
	shards, err := l.shards(ctx, servers)
	if err != nil {
		return Page{}, unavailable(err)
	}
	if err := at.fits(o.Cursor, shards); err != nil {
		return Page{}, err
	}
	var page Page
	first := at.shard
	found, err := l.scanPage(ctx, &page, shards, &at, o)
	if err != nil {
		return Page{RoundTrips: page.RoundTrips}, err
	}
	if at.shard < len(shards) {
		page.Cursor = at.String(shards)
	}
	if err := l.readPage(ctx, &page, servers, found, at.skipped, first, o.Free); err != nil {
		return Page{RoundTrips: page.RoundTrips}, err
	}
	return page, nil
}

// checkList refuses bad ListOptions and fills in the defaults.
func (l *Locker) checkList(ctx context.Context, o ListOptions) (ListOptions, error) {
	switch {
	case l == nil:
		return o, invalid("nil Locker")
	case l.err != nil:
		return o, l.err
	case ctx == nil:
		return o, invalid("nil context")
	case o.Scans < 0 || o.Scans > 1000:
		return o, invalid("Scans %d is outside 1..1000", o.Scans)
	case o.Count < 0 || o.Count > 100000:
		return o, invalid("Count %d is outside 1..100000", o.Count)
	case len(o.Match) > MaxKeyLen:
		return o, invalid("Match of %d bytes exceeds %d", len(o.Match), MaxKeyLen)
	case o.Limit < 0:
		return o, invalid("negative Limit %d", o.Limit)
	case len(o.Cursor) > maxCursorLen:
		return o, invalid("cursor of %d bytes is not one List returned", len(o.Cursor))
	}
	o.Scans = cmp.Or(o.Scans, 10)
	o.Count = cmp.Or(o.Count, 1000)
	o.Match = cmp.Or(o.Match, "*")
	return o, nil
}

// foundKey is a lock key a SCAN found, and the shard it was found on.
type foundKey struct {
	key, name string
	shard     int
}

// scanPage makes up to o.Scans SCAN calls from at on, moving at along, and
// returns the lock keys found that match o.Match. A Redlock node that fails
// is skipped (the listing goes on without it, and says so); any other
// server's failure ends the call.
func (l *Locker) scanPage(ctx context.Context, page *Page, shards []scanShard, at *listCursor, o ListOptions) ([]foundKey, error) {
	var found []foundKey
	match := escapeGlob(l.cfg.prefix) + "{*"
	for scans := 0; scans < o.Scans && at.shard < len(shards) && (o.Limit == 0 || len(found) < o.Limit); scans++ {
		// The call's own variables: one the caller stopped waiting for
		// (pending) may still write them, and they are then never read.
		var got []string
		var next uint64
		sh, from := shards[at.shard], at.cursor
		callCtx, cancel := l.nodeShare(ctx, len(shards)-at.shard)
		pending, err := l.interruptible(callCtx, func(ctx context.Context) error {
			k, n, err := sh.c.ScanType(ctx, from, match, int64(o.Count), "string").Result()
			got, next = k, n
			return err
		})
		cancel()
		page.RoundTrips++
		if err != nil && l.isRedlock() && ctx.Err() == nil {
			// A node down: every lock a majority holds is on the others.
			page.Skipped = append(page.Skipped, fmt.Errorf("scan node %s: %w", l.nodeName(at.shard), err))
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
			if key, ok := l.keyOf(name); ok && matchGlob(o.Match, key) {
				found = append(found, foundKey{key, name, at.shard})
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
func (l *Locker) nodeShare(ctx context.Context, nodesLeft int) (context.Context, context.CancelFunc) {
	dl, ok := ctx.Deadline()
	if !l.isRedlock() || !ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, time.Until(dl)/time.Duration(nodesLeft+1))
}

// readPage reads every lock found in one pipelined round trip per server,
// all servers at once, and adds to page those it lists. Redlock reads every
// node even when nothing was found: fewer than a quorum answering is an
// error, not an empty page. skipped are the Redlock nodes the listing could
// not scan, whose locks it lists where the other nodes hold them; this page
// began at shard first, and those it skipped are not asked again.
func (l *Locker) readPage(ctx context.Context, page *Page, servers []redis.UniversalClient, found []foundKey, skipped []int, first int, free bool) error {
	if len(found) == 0 && !l.isRedlock() {
		return nil
	}
	calls := make([]redisproto.Call, len(found))
	for i, n := range found {
		calls[i] = redisproto.Call{Keys: []string{n.name, redisproto.QueueOf(n.name), redisproto.AuditOf(n.name)}, Args: []any{inspectWaiters, 0}}
	}
	replies, serverErrs := eachServer(l, ctx, servers, func(ctx context.Context, s int, c redis.UniversalClient) ([]*redis.Cmd, error) {
		if s >= first && slices.Contains(skipped, s) {
			return nil, errSkipped // it failed its SCAN just now: not waited for again
		}
		if len(calls) == 0 {
			return nil, c.Ping(ctx).Err()
		}
		return redisproto.RunScriptsRO(ctx, c, redisproto.InspectScript, calls)
	})
	page.RoundTrips++
	if err := l.quorumAnswered(servers, serverErrs); err != nil {
		return err
	}
	for s, err := range serverErrs {
		if err != nil && err != errSkipped { // (said once a page)
			page.Skipped = append(page.Skipped, fmt.Errorf("read node %s: %w", l.nodeName(s), err))
		}
	}
	views := viewsByKey(len(found), replies, serverErrs)
	for i, n := range found {
		if l.isRedlock() && listedEarlier(views[i][:n.shard], skipped) {
			continue
		}
		in, err := l.viewOf(n.key, n.name, views[i])
		if err != nil {
			if !l.isRedlock() {
				return err
			}
			page.Skipped = append(page.Skipped, fmt.Errorf("read %q: %w", n.key, err))
			continue
		}
		if in.State != Free || free {
			page.Locks = append(page.Locks, in)
		}
	}
	return nil
}

// quorumAnswered fails unless enough servers answered a listing's read:
// one of one deployment's, a quorum of Redlock's nodes.
func (l *Locker) quorumAnswered(servers []redis.UniversalClient, errs []error) error {
	if !l.isRedlock() {
		return unavailable(errs[0]) // nil when it answered
	}
	need := l.quorum
	var failed []error
	for s, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Errorf("node %s: %w", l.nodeName(s), err))
		}
	}
	if answered := len(servers) - len(failed); answered < need {
		return unavailable(fmt.Errorf("list: %d of %d nodes answered, %d needed: %w", answered, len(servers), need, errors.Join(failed...)))
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

// ListAll walks a whole listing (List, page after page) and returns every
// lock found, or the first error. When a page was partial (Page.Skipped),
// it returns the locks found with an error matching ErrPartial that says
// why: a caller that stops at any error never takes a partial listing for a
// whole one.
func (l *Locker) ListAll(ctx context.Context, o ListOptions) ([]LockInfo, error) {
	var out []LockInfo
	var skipped []error
	for {
		page, err := l.List(ctx, o)
		if err != nil {
			return out, err
		}
		out = append(out, page.Locks...)
		skipped = append(skipped, page.Skipped...)
		if page.Cursor == "" {
			break
		}
		o.Cursor = page.Cursor
	}
	if len(skipped) > 0 {
		return out, fmt.Errorf("%w: %w", ErrPartial, errors.Join(skipped...))
	}
	return out, nil
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
func (l *Locker) shards(ctx context.Context, servers []redis.UniversalClient) ([]scanShard, error) {
	var out []scanShard
	for i, c := range servers {
		cc, ok := c.(*redis.ClusterClient)
		if !ok {
			addr := ""
			if i < len(l.addrs) {
				addr = l.addrs[i]
			}
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

// errSkipped: a Redlock node this page did not ask again.
var errSkipped = errors.New("skipped: it did not answer its SCAN")
