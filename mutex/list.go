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
// once; keys that come and go meanwhile may or may not be. Waiters are
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
	shard, cursor, err := parseCursor(o.Cursor)
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
	var page Page
	type found struct {
		key, name string
		shard     int
	}
	var names []found
	match := escapeGlob(l.cfg.prefix) + "{*"
	for scans := 0; scans < o.Scans && shard < len(shards); scans++ {
		var keys []string
		_, err := l.call(ctx, func(ctx context.Context) error {
			var err error
			keys, cursor, err = shards[shard].c.ScanType(ctx, cursor, match, int64(o.Count), "string").Result()
			return err
		})
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
		page.Cursor = strconv.Itoa(shard) + ":" + strconv.FormatUint(cursor, 10)
	}
	if len(names) == 0 {
		return page, nil
	}
	// One pipelined read of every lock found, on every server at once.
	calls := make([]scriptCall, len(names))
	for i, n := range names {
		calls[i] = scriptCall{keys: []string{n.name, queueOf(n.name), auditOf(n.name)}, args: []any{inspectWaiters, 0}}
	}
	views := make([][]nodeView, len(names)) // by name, by server
	for i := range views {
		views[i] = make([]nodeView, len(servers))
	}
	var mu sync.Mutex
	var errs []error
	l.eachServer(ctx, servers, func(ctx context.Context, s int, c redis.UniversalClient) error {
		cmds, err := runScripts(ctx, c, inspectScript, calls, nil)
		for i, cmd := range cmds {
			v, cerr := readView(cmd)
			if cerr == nil && err != nil && !errors.Is(err, redis.Nil) {
				cerr = err
			}
			v.err = cerr
			views[i][s] = v
		}
		if err != nil && cmds == nil {
			for i := range views {
				views[i][s].err = err
			}
		}
		if err != nil {
			mu.Lock()
			errs = append(errs, err)
			mu.Unlock()
		}
		return err
	})
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

func parseCursor(s string) (shard int, cursor uint64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	a, b, ok := strings.Cut(s, ":")
	shard, err1 := strconv.Atoi(a)
	cursor, err2 := strconv.ParseUint(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || shard < 0 {
		return 0, 0, invalid("cursor %q is not one List returned", s)
	}
	return shard, cursor, nil
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
// byte, [abc], [^a], [a-z], and \ to quote the next byte.
func matchGlob(p, s string) bool {
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for i := 0; i <= len(s); i++ {
				if matchGlob(p[1:], s[i:]) {
					return true
				}
			}
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			hit := false
			for len(p) > 0 && p[0] != ']' {
				switch {
				case p[0] == '\\' && len(p) >= 2:
					p = p[1:]
					hit = hit || p[0] == s[0]
				case len(p) >= 3 && p[1] == '-':
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					hit = hit || (s[0] >= lo && s[0] <= hi)
					p = p[2:]
				default:
					hit = hit || p[0] == s[0]
				}
				p = p[1:]
			}
			if hit == not {
				return false
			}
			s = s[1:]
			if len(p) == 0 {
				return false // unclosed [: Redis matches it to the end; we refuse
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
	}
	return len(s) == 0
}
