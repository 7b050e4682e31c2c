package mutex

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/redfence/redfence/mutex/internal/redisproto"
)

// State is what a lock key is in, as inspection sees it.
type State int

const (
	// Free: nobody holds the key (it may never have been locked, or its
	// lease ran out).
	Free State = iota
	// Held: an owner holds it.
	Held
	// Reserved: a release kept it for a moment for the Locker first in
	// its queue, which is about to take it.
	Reserved
)

func (s State) String() string {
	switch s {
	case Held:
		return "held"
	case Reserved:
		return "reserved"
	}
	return "free"
}

// LockInfo is a lock key as its servers see it, at ServerTime. For a
// Redlock Locker it is the quorum's view: Held when a majority of nodes
// hold it for one owner and token, with the lease a majority still grants;
// Nodes has what each node holds.
type LockInfo struct {
	Key   string // the key given to Lock
	Name  string // the Redis key that holds it
	State State
	// Token is the holder's fencing token; for a free key, the last token
	// issued (0: none is remembered), which every later one exceeds.
	Token int64
	// Owner is the holder's owner id, or the Locker a reserved key is kept
	// for; Info is what that Locker was given with WithOwnerInfo, read back
	// from the id for display (zero for an id of another shape, as
	// WithOwner's usually are).
	Owner string
	Info  OwnerInfo
	Count int // re-entries in Redis (WithOwner), plus one
	// AcquiredAt is when the token was issued, by the server's clock: a
	// token is the server's time in µs unless the clock stepped back or an
	// operator forced a release in the same microsecond, so it is read as
	// one (zero when it cannot be a time). On Redlock a token is mostly
	// the acquiring client's proposal, its clock 100 ms ahead, and is read
	// so: by that client's clock. RenewedAt is when the current lease
	// began, by the server's clock; Lease what is left of it.
	AcquiredAt time.Time
	RenewedAt  time.Time
	Lease      time.Duration
	// Waited: a waiting Lock found it held since it was acquired.
	Waited bool
	// Waiters are the Lockers queued for the key, longest waiting first (a
	// single deployment keeps this queue; Redlock does not). A Locker that
	// gave up stays listed until its turn comes and passes.
	Waiters []Waiter
	// Forced are the latest forced releases of the key, latest first
	// (Inspect only).
	Forced     []ForcedRelease
	ServerTime time.Time
	// Nodes is, for Redlock, each node's own view, by node.
	Nodes []NodeInfo
}

// Waiter is a Locker queued for a key.
type Waiter struct {
	Locker string // its id
	Info   OwnerInfo
	Since  time.Time     // its first attempt that found the key held (server clock)
	Waited time.Duration // until ServerTime
}

// ForcedRelease is an entry of a key's audit stream (see ForceRelease).
type ForcedRelease struct {
	ID     string // the stream entry's id
	At     time.Time
	By     string
	Reason string
	Token  int64  // the holder's, which lost the lock
	Floor  int64  // the token floor left behind: later tokens exceed it
	Owner  string // the holder's owner id
	Info   OwnerInfo
	Count  int
}

// NodeInfo is one Redlock node's view of a key.
type NodeInfo struct {
	Node int
	Addr string
	Info LockInfo // without Nodes
	Err  error
}

// Inspection limits: a key's queue and audit stream can be long; a view
// shows their heads.
const (
	inspectWaiters = 100
	inspectForced  = 10
)

var errInspectUnsupported = fmt.Errorf("%w: this Locker's backend offers no inspection (NewWithBackend)", errors.ErrUnsupported)

// servers are the clients that hold the Locker's lock keys: the one
// deployment, or Redlock's nodes; nil for an outside backend.
func (l *Locker) servers() []redis.UniversalClient { return l.be.servers() }

func (l *Locker) isRedlock() bool { return len(l.nodes) > 0 }

// Inspect returns key's state as the servers hold it: owner, token, lease,
// waiters and the latest forced releases, in one round trip per server.
// It changes nothing, and reads with a read-only script (EVALSHA_RO where
// the server has it), which a CLIENT PAUSE WRITE does not hold. An outside
// backend (NewWithBackend) answers when it implements backend.Inspector,
// and returns an error matching errors.ErrUnsupported otherwise; bad input
// one matching ErrInvalid.
func (l *Locker) Inspect(ctx context.Context, key string) (LockInfo, error) {
	if err := l.check(ctx, key); err != nil {
		return LockInfo{}, err
	}
	if l.insp != nil {
		return l.inspectVia(ctx, key)
	}
	servers := l.servers()
	if servers == nil {
		return LockInfo{}, errInspectUnsupported
	}
	name := l.be.name(key)
	call := redisproto.Call{
		Keys: []string{name, redisproto.QueueOf(name), redisproto.AuditOf(name)},
		Args: []any{inspectWaiters, inspectForced},
	}
	views, errs := eachServer(l, ctx, servers, func(ctx context.Context, _ int, c redis.UniversalClient) (nodeView, error) {
		cmds, err := redisproto.RunScriptsRO(ctx, c, redisproto.InspectScript, []redisproto.Call{call})
		if err != nil {
			return nodeView{}, err
		}
		return readView(cmds[0])
	})
	for i, err := range errs {
		views[i].err = err
	}
	return l.viewOf(key, name, views)
}

// eachServer runs fn for every server at once, each under ctx's deadline,
// and returns each one's result and error. A server that had not answered
// when ctx ended gets ctx's error and no result: what its call does later
// is never read (an outcome unknown, not an answer).
func eachServer[T any](l *Locker, ctx context.Context, servers []redis.UniversalClient, fn func(ctx context.Context, i int, c redis.UniversalClient) (T, error)) ([]T, []error) {
	results := make([]T, len(servers))
	errs := make([]error, len(servers))
	one := func(i int) {
		var v T // written by fn, read only once fn has returned here
		pending, err := l.interruptible(ctx, func(ctx context.Context) error {
			var err error
			v, err = fn(ctx, i, servers[i])
			return err
		})
		if pending == nil && err == nil {
			results[i] = v
		}
		l.noAnswer(err) // on Cluster, a hung master's replica may have taken over
		errs[i] = err
	}
	if len(servers) == 1 {
		one(0)
		return results, errs
	}
	var wg sync.WaitGroup
	for i := range servers {
		wg.Go(func() { one(i) })
	}
	wg.Wait()
	return results, errs
}

// nodeView is one server's answer for one key.
type nodeView struct {
	now     time.Time
	value   string
	waiters []Waiter
	forced  []ForcedRelease
	err     error
}

func readView(cmd *redis.Cmd) (nodeView, error) {
	r, err := cmd.Slice()
	if err != nil {
		return nodeView{}, err
	}
	if len(r) != 6 {
		return nodeView{}, fmt.Errorf("mutex: inspect: unexpected reply of %d parts", len(r))
	}
	sec, _ := strconv.ParseInt(fmt.Sprint(r[0]), 10, 64)
	us, _ := strconv.ParseInt(fmt.Sprint(r[1]), 10, 64)
	v := nodeView{now: time.Unix(sec, us*1000)}
	v.value, _ = r[2].(string)
	if q, ok := r[4].([]any); ok {
		for i := 0; i+1 < len(q); i += 2 {
			id, _ := q[i].(string)
			since := redisproto.MicroTime(fmt.Sprint(q[i+1]))
			info, _ := parseOwner(id)
			w := Waiter{Locker: id, Info: info, Since: since}
			if !since.IsZero() {
				w.Waited = max(v.now.Sub(since), 0)
			}
			v.waiters = append(v.waiters, w)
		}
	}
	if a, ok := r[5].([]any); ok {
		for _, e := range a {
			v.forced = append(v.forced, readForced(e))
		}
	}
	return v, nil
}

// readForced reads one XREVRANGE entry of the audit stream.
func readForced(e any) ForcedRelease {
	var f ForcedRelease
	parts, _ := e.([]any)
	if len(parts) != 2 {
		return f
	}
	f.ID, _ = parts[0].(string)
	if ms, err := strconv.ParseInt(strings.SplitN(f.ID, "-", 2)[0], 10, 64); err == nil {
		f.At = time.UnixMilli(ms)
	}
	fields, _ := parts[1].([]any)
	for i := 0; i+1 < len(fields); i += 2 {
		k, _ := fields[i].(string)
		val, _ := fields[i+1].(string)
		switch k {
		case "by":
			f.By = val
		case "reason":
			f.Reason = val
		case "token":
			f.Token, _ = strconv.ParseInt(val, 10, 64)
		case "floor":
			f.Floor, _ = strconv.ParseInt(val, 10, 64)
		case "owner":
			f.Owner = val
			f.Info, _ = parseOwner(val)
		case "count":
			f.Count, _ = strconv.Atoi(val)
		}
	}
	return f
}

// info reads one server's view of a key.
func (v *nodeView) info(key, name string) LockInfo {
	in := LockInfo{Key: key, Name: name, ServerTime: v.now, Waiters: v.waiters, Forced: v.forced}
	val, ok := redisproto.ParseValue(v.value)
	if !ok {
		return in // none, or unreadable: free, as acquire takes it
	}
	in.Token = val.Token
	if val.Released {
		in.Waiters = nil
		return in
	}
	in.Count, in.Waited, in.Owner = val.Count, val.Waited, val.Owner
	in.Info, _ = parseOwner(in.Owner)
	in.RenewedAt = val.From
	in.Lease = val.From.Add(val.Lease).Sub(v.now)
	if in.Lease <= 0 || val.From.IsZero() {
		// Free: the lease ran out. The token stays: the next exceeds it.
		return LockInfo{Key: key, Name: name, ServerTime: v.now, Token: in.Token, Waiters: v.waiters, Forced: v.forced}
	}
	in.State = Held
	if in.Count == 0 {
		in.State = Reserved
		return in // kept for a waiter: no acquisition yet
	}
	in.AcquiredAt = val.Issued
	if in.AcquiredAt.After(val.From) {
		in.AcquiredAt = time.Time{} // a raised (Redlock) or floored token
	}
	return in
}

// viewOf is the LockInfo of views, one per server: the server's own, or
// for Redlock the quorum's.
func (l *Locker) viewOf(key, name string, views []nodeView) (LockInfo, error) {
	if !l.isRedlock() {
		if err := views[0].err; err != nil {
			return LockInfo{}, unavailable(err)
		}
		return views[0].info(key, name), nil
	}
	return l.quorumView(key, name, views)
}

// keyOf reads back the user key of a lock key named by this Locker; ok is
// false for any other key under the prefix (queues, audit streams, other
// data).
func (l *Locker) keyOf(name string) (key string, ok bool) {
	return redisproto.KeyOf(l.cfg.prefix, name)
}
