package mutex

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
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
}

// Page is one List call's part of a listing.
type Page struct {
	Locks []LockInfo // in the order they were found
	// Cursor continues the listing; "" once every server was scanned whole.
	Cursor string
	// RoundTrips is the number of round trips this call made, counting
	// calls to several servers at once as one.
	RoundTrips int
	// Skipped are the Redlock nodes this call could not scan (the listing
	// goes on without them: a lock a majority holds is on the others).
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
// listed, forced releases are not (Inspect shows them). An outside backend
// (NewWithBackend) returns an error matching errors.ErrUnsupported.
func (l *Locker) List(ctx context.Context, o ListOptions) (Page, error) {
	switch {
	case l == nil:
		return Page{}, invalid("nil Locker")
	case l.err != nil:
		return Page{}, l.err
	case ctx == nil:
		return Page{}, invalid("nil context")
	case o.Scans < 0 || o.Scans > 1000:
		return Page{}, invalid("Scans %d is outside 1..1000", o.Scans)
	case o.Count < 0 || o.Count > 100000:
		return Page{}, invalid("Count %d is outside 1..100000", o.Count)
	case len(o.Match) > MaxKeyLen:
		return Page{}, invalid("Match of %d bytes exceeds %d", len(o.Match), MaxKeyLen)
	}
	if o.Scans == 0 {
		o.Scans = 10
	}
	if o.Count == 0 {
		o.Count = 1000
	}
	if o.Match == "" {
		o.Match = "*"
	}
	servers := l.servers()
	if servers == nil {
		return Page{}, errInspectUnsupported
	}
	shard, cursor, addr, err := parseCursor(o.Cursor)
	if err != nil {
		return Page{}, err
	}
	shards, err := l.shards(ctx, servers)
	if err != nil {
		return Page{}, unavailable(err)
	}
	if shard >= len(shards) { // a finished listing's cursor is "", never this
		return Page{}, invalid("cursor %q names shard %d of %d", o.Cursor, shard, len(shards))
	}
	if o.Cursor != "" && addr != shards[shard].addr {
		// A SCAN cursor means nothing on another server: after a failover
		// or a resharding the listing starts again.
		return Page{}, invalid("cursor %q is for %s, and shard %d is now %s: the servers changed, start the listing again", o.Cursor, addr, shard, shards[shard].addr)
	}
	var page Page
	type found struct {
		key, name string
		shard     int
	}
	var names []found
	match := escapeGlob(l.cfg.prefix) + "{*"
	for scans := 0; scans < o.Scans && shard < len(shards); scans++ {
		// The call's own variables: one the caller stopped waiting for
		// (pending) may still write them, and they are then never read.
		var got []string
		var next uint64
		sh, from := shards[shard], cursor
		pending, err := l.call(ctx, func(ctx context.Context) error {
			k, n, err := sh.c.ScanType(ctx, from, match, int64(o.Count), "string").Result()
			got, next = k, n
			return err
		})
		var keys []string
		if pending == nil && err == nil {
			keys, cursor = got, next
		}
		page.RoundTrips++
		if err != nil && l.isRedlock() {
			// A node down: every lock a majority holds is on the others.
			page.Skipped = append(page.Skipped, fmt.Errorf("scan %s: %w", shards[shard].addr, err))
			shard, cursor = shard+1, 0
			continue
		}
		if err != nil {
			return Page{RoundTrips: page.RoundTrips}, unavailable(fmt.Errorf("scan %s: %w", shards[shard].addr, err))
		}
		for _, name := range keys {
			if key, ok := l.keyOf(name); ok && matchGlob(o.Match, key) {
				names = append(names, found{key, name, shard})
			}
		}
		if cursor == 0 {
			shard++
		}
	}
	if shard < len(shards) {
		page.Cursor = strconv.Itoa(shard) + ":" + strconv.FormatUint(cursor, 10) + ":" + shards[shard].addr
	}
	if len(names) == 0 {
		return page, nil
	}
	// One pipelined read of every lock found, on every server at once.
	calls := make([]scriptCall, len(names))
	for i, n := range names {
		calls[i] = scriptCall{keys: []string{n.name, queueOf(n.name), auditOf(n.name)}, args: []any{inspectWaiters, 0}}
	}
	replies, serverErrs := eachServer(l, ctx, servers, func(ctx context.Context, c redis.UniversalClient) ([]*redis.Cmd, error) {
		return runScripts(ctx, c, inspectScript, calls, nil)
	})
	views := make([][]nodeView, len(names)) // by name, by server
	for i := range views {
		views[i] = make([]nodeView, len(servers))
	}
	var errs []error
	for s, cmds := range replies {
		err := serverErrs[s]
		for i := range views {
			v, cerr := nodeView{}, err
			if i < len(cmds) {
				if v, cerr = readView(cmds[i]); cerr == nil && err != nil && !errors.Is(err, redis.Nil) {
					cerr = err
				}
			}
			v.err = cerr
			views[i][s] = v
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	page.RoundTrips++
	for i, n := range names {
		if l.isRedlock() && slices.ContainsFunc(views[i][:n.shard], func(v nodeView) bool { return v.err == nil && v.value != "" }) {
			continue // found on an earlier node, and listed there
		}
		in, err := l.viewOf(n.key, n.name, views[i])
		if err != nil {
			if !l.isRedlock() {
				return Page{RoundTrips: page.RoundTrips}, err
			}
			continue // too few nodes answered for this key
		}
		if in.State != Free || o.Free {
			page.Locks = append(page.Locks, in)
		}
	}
	if answered := len(servers) - len(errs); answered == 0 || l.isRedlock() && answered < l.quorum {
		return Page{RoundTrips: page.RoundTrips}, unavailable(errors.Join(errs...))
	}
	return page, nil
}

// ListAll walks a whole listing (List, page after page) and returns every
// lock found, or the first error.
func (l *Locker) ListAll(ctx context.Context, o ListOptions) ([]LockInfo, error) {
	var out []LockInfo
	for {
		page, err := l.List(ctx, o)
		if err != nil {
			return out, err
		}
		out = append(out, page.Locks...)
		if page.Cursor == "" {
			return out, nil
		}
		o.Cursor = page.Cursor
	}
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

func parseCursor(s string) (shard int, cursor uint64, addr string, err error) {
	if s == "" {
		return 0, 0, "", nil
	}
	parts := strings.SplitN(s, ":", 3)
	if len(parts) != 3 {
		return 0, 0, "", invalid("cursor %q is not one List returned", s)
	}
	shard, err1 := strconv.Atoi(parts[0])
	cursor, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || shard < 0 {
		return 0, 0, "", invalid("cursor %q is not one List returned", s)
	}
	return shard, cursor, parts[2], nil
}

// escapeGlob quotes s for a Redis MATCH pattern.
func escapeGlob(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// matchGlob is Redis's glob matching (stringmatchlen): * any run, ? any
// byte, [abc], [^a], [a-z], and \ to quote the next byte. It backtracks
// only to the last *, so its cost is at most len(p)·len(s), whatever the
// pattern (the debug page takes one from a request).
func matchGlob(p, s string) bool {
	pi, si := 0, 0
	star, mark := -1, 0 // the last * seen, and where s stood after it
	for si < len(s) {
		if pi < len(p) {
			if p[pi] == '*' {
				star, mark = pi, si
				pi++
				continue
			}
			if n, ok := matchOne(p[pi:], s[si]); ok {
				pi += n
				si++
				continue
			}
		}
		if star < 0 {
			return false
		}
		mark++
		pi, si = star+1, mark
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// matchOne matches the byte c against the pattern item at the start of p
// (not a *), and says how long the item is.
func matchOne(p string, c byte) (n int, ok bool) {
	switch p[0] {
	case '?':
		return 1, true
	case '\\':
		if len(p) >= 2 {
			return 2, p[1] == c
		}
		return 1, c == '\\'
	case '[':
		i := 1
		not := i < len(p) && p[i] == '^'
		if not {
			i++
		}
		hit := false
		for i < len(p) && p[i] != ']' {
			switch {
			case p[i] == '\\' && i+1 < len(p):
				i++
				hit = hit || p[i] == c
			case i+2 < len(p) && p[i+1] == '-':
				lo, hi := p[i], p[i+2]
				if lo > hi {
					lo, hi = hi, lo
				}
				hit = hit || (c >= lo && c <= hi)
				i += 2
			default:
				hit = hit || p[i] == c
			}
			i++
		}
		if i >= len(p) {
			return len(p), false // unclosed [: Redis matches it to the end; we refuse
		}
		return i + 1, hit != not
	}
	return 1, p[0] == c
}
