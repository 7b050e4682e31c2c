package mutex

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// NewRedlock returns a Locker over N ≥ 3 independent Redis masters (not
// replicas of one another, not a Cluster): a lock is held when a majority,
// N/2+1, granted it within its validity. The Locker has the API and the
// semantics of a single-deployment one (tokens, renewal, reentrancy,
// waiting, telemetry); see the package documentation for the algorithm and
// what it assumes. A bad argument returns an error wrapping ErrInvalid.
func NewRedlock(clients []redis.UniversalClient, opts ...Option) (*Locker, error) {
	if len(clients) < 3 {
		return nil, invalid("Redlock needs at least 3 independent masters, got %d", len(clients))
	}
	addrs, err := nodeAddrs(clients)
	if err != nil {
		return nil, err
	}
	l := New(clients[0], opts...)
	if l.err != nil {
		err := l.err
		_ = l.Close()
		return nil, err
	}
	l.nodes = slices.Clone(clients)
	l.addrs = addrs
	l.quorum = len(clients)/2 + 1
	return l, nil
}

// nodeName names node i in errors: its index, and its address when known.
func (l *Locker) nodeName(i int) string {
	if l.addrs[i] == "" {
		return strconv.Itoa(i)
	}
	return strconv.Itoa(i) + " (" + l.addrs[i] + ")"
}

// nodeAddrs checks that Redlock's clients are distinct standalone or
// Sentinel clients and returns their addresses ("" for Sentinel). One
// server twice would make one node count as two votes: a quorum of one
// machine. Two names for one address (localhost and 127.0.0.1) are not
// caught.
func nodeAddrs(clients []redis.UniversalClient) ([]string, error) {
	addrs := make([]string, len(clients))
	for i, c := range clients {
		switch v := c.(type) {
		case nil:
			return nil, invalid("Redlock node %d is nil", i)
		case *redis.Client:
			if v == nil {
				return nil, invalid("Redlock node %d is nil", i)
			}
			// go-redis names a Sentinel client's Addr "FailoverClient": no
			// address to compare. (A custom Dialer that reaches several
			// servers under one Addr must give them distinct Addrs.)
			if a := v.Options().Addr; a != "FailoverClient" {
				addrs[i] = a
			}
		case *redis.ClusterClient:
			return nil, invalid("Redlock node %d is a Cluster client: Redlock needs independent masters", i)
		}
		for j := range i {
			if reflect.TypeOf(c).Comparable() && clients[j] == c {
				return nil, invalid("Redlock nodes %d and %d are the same client: each node must be its own master", j, i)
			}
			if addrs[i] != "" && addrs[j] == addrs[i] {
				return nil, invalid("Redlock nodes %d and %d both reach %s: each node must be its own master", j, i, addrs[i])
			}
		}
	}
	return addrs, nil
}

// proposalLead is how far ahead of this process's clock a Redlock attempt
// proposes its token: enough to cover the one-way latency and the clock
// differences between this host and the nodes, so that nodes usually take
// the proposal. A node that issues more instead only costs the raise round.
const proposalLead = 100 * time.Millisecond

// nodeTimeout is the per-node bound of one Redlock call.
func (l *Locker) nodeTimeout(ttl time.Duration) time.Duration {
	if l.cfg.nodeTimeout > 0 {
		return l.cfg.nodeTimeout
	}
	return min(max(ttl/20, 5*time.Millisecond), 500*time.Millisecond)
}

// nodeReply is one node's answer to a fan-out call. pending is set when the
// node did not answer in time: it reports the call's eventual end, so clean-up
// can come after whatever the call did on that node.
type nodeReply struct {
	vals    []int64
	err     error
	pending <-chan error
	late    *[]int64 // with pending: the call's values, to read once pending is done
}

// fanout runs fn on every node at once, each under ctx bounded by timeout,
// and returns when all answered or the timeout passed. Calls that did not
// answer in time are left to finish in goroutines the Locker owns (Close waits
// for them); go-redis bounds them by its own read timeout.
func (l *Locker) fanout(ctx context.Context, timeout time.Duration, nodes []int, fn func(ctx context.Context, c redis.UniversalClient) ([]int64, error)) []nodeReply {
	return l.fanoutUntil(ctx, timeout, nodes, fn, nil)
}

// fanoutUntil is fanout that also stops waiting as soon as enough says the
// replies so far decide the outcome; the nodes still out are reported like
// those that timed out (with pending set).
func (l *Locker) fanoutUntil(ctx context.Context, timeout time.Duration, nodes []int, fn func(ctx context.Context, c redis.UniversalClient) ([]int64, error), enough func([]nodeReply, []bool) bool) []nodeReply {
	// The calls run on a context of their own, ended by the caller's ctx or
	// the timeout but not by an early return: a call abandoned early still
	// completes, and its pending channel says when.
	callCtx, cancelCalls, stopWatch := callContext(ctx, timeout)
	left := atomic.Int32{}
	left.Store(int32(len(nodes)))
	type result struct {
		i    int
		vals []int64
		err  error
	}
	out := make([]nodeReply, len(l.nodes))
	results := make(chan result, len(nodes))
	done := make([]chan error, len(l.nodes))
	late := make([][]int64, len(l.nodes))
	for _, i := range nodes {
		done[i] = make(chan error, 1)
		l.goBg(func() {
			vals, err := fn(callCtx, l.nodes[i])
			late[i] = vals // read only after done[i]
			done[i] <- err
			results <- result{i, vals, err}
			if left.Add(-1) == 0 {
				stopWatch()
				cancelCalls()
			}
		})
	}
	answered := make([]bool, len(l.nodes))
	decided := false
	// callCtx (one timer for both) ends at the timeout, with the caller's
	// ctx, or once every call returned; in that last case, and in a race
	// with the others, replies already sent are still taken.
wait:
	for n := 0; n < len(nodes); n++ {
		var r result
		select {
		case r = <-results:
		case <-callCtx.Done():
			select {
			case r = <-results:
			default:
				break wait
			}
		}
		if r.err != nil && callCtx.Err() != nil && (errors.Is(r.err, context.DeadlineExceeded) || errors.Is(r.err, context.Canceled)) {
			r.err = timedOut(ctx, timeout) // the call returned its context's end
		}
		out[r.i] = nodeReply{vals: r.vals, err: r.err}
		answered[r.i] = true
		if enough != nil && enough(out, answered) {
			decided = true
			break
		}
	}
	// Why a node has no reply: not awaited, the caller's ctx, or the timeout.
	why := errNotAwaited
	if !decided {
		why = timedOut(ctx, timeout)
	}
	for _, i := range nodes {
		if !answered[i] {
			out[i] = nodeReply{err: why, pending: done[i], late: &late[i]}
		}
	}
	return out
}

// errNotAwaited: a node whose reply a fan-out did not wait for, since the
// others' had decided.
var errNotAwaited = errors.New("reply not awaited: the other nodes decided")

// timedOut is why a node's call ended unanswered: the caller's ctx, or
// else the node timeout.
func timedOut(ctx context.Context, timeout time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return &noReplyError{timeout}
}

// noReplyError: a node that did not answer within the node timeout.
type noReplyError struct{ timeout time.Duration }

func (e *noReplyError) Error() string   { return "no reply within " + e.timeout.String() }
func (e *noReplyError) Timeout() bool   { return true }
func (e *noReplyError) Temporary() bool { return true }

// callContext is the context of a fan-out's calls: ctx's values, ended at
// the timeout or with ctx, but not by the fan-out's early return. A ctx that
// can never end (no Done channel) needs neither WithoutCancel nor AfterFunc:
// three allocations fewer per fan-out.
func callContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc, func() bool) {
	if ctx.Done() == nil {
		callCtx, cancel := context.WithTimeout(ctx, timeout)
		return callCtx, cancel, noWatch
	}
	callCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
	return callCtx, cancel, context.AfterFunc(ctx, cancel)
}

func noWatch() bool { return true }

func allNodes(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// redlockAcquire is one Redlock attempt: acquire on every node, and with a
// majority inside the validity, raise the majority's tokens to the highest
// and require a majority to confirm. Otherwise it releases what it took, on
// a fresh bounded context, and reports contention (or an error when too few
// nodes answered to tell).
func (l *Locker) redlockAcquire(ctx context.Context, lockKey, owner string, lc *lockConfig, waiting bool) (acquireResult, error) {
	span := trace.SpanFromContext(ctx)
	start := l.now()
	timeout := l.nodeTimeout(lc.ttl)
	keys := []string{lockKey}
	// Stop waiting once the replies decide: a majority granted, or too many
	// refused or failed for a majority to remain possible.
	decided := func(out []nodeReply, answered []bool) bool {
		yes, no := 0, 0
		for i, r := range out {
			if !answered[i] {
				continue
			}
			if r.err == nil && len(r.vals) == 3 && r.vals[0] != 0 {
				yes++
			} else {
				no++
			}
		}
		return yes >= l.quorum || no > len(l.nodes)-l.quorum
	}
	if lc.owner != "" {
		// An explicit owner can re-enter from anywhere, and a re-entry must
		// see one token on every node: wait for all nodes (within the node
		// timeout) so that the raise reaches each node that granted.
		decided = nil
	}
	// Propose a token a little ahead of our clock: nodes whose counter and
	// clock are behind it take it as it is, and when the whole quorum did,
	// the quorum already carries one token and the raise round is skipped.
	proposal := l.now().Add(proposalLead).UnixMicro()
	args := []any{owner, lc.ttl.Milliseconds(), l.keyTTL(lc.ttl), proposal}
	if waiting {
		args = append(args, l.id) // marks the lock waited-for, so that its release publishes
	}
	replies := l.fanoutUntil(ctx, timeout, allNodes(len(l.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		reply, err := acquireScript.Run(ctx, c, keys, args...).Result()
		if err != nil {
			return nil, err
		}
		n, _, err := parseAcquire(reply)
		return n[:], err
	}, decided)
	var (
		voters    []int
		tokens    = make([]int64, len(l.nodes))
		reentered = 0
		remaining time.Duration
		answers   = make([]error, len(l.nodes)) // a QuorumError's Nodes
		outcomes  = make([]string, len(l.nodes))
	)
	for i, r := range replies {
		switch {
		case r.err != nil:
			answers[i] = r.err
			outcomes[i] = "error"
			if r.pending != nil {
				outcomes[i] = "timeout"
			}
		case len(r.vals) != 3:
			answers[i] = errors.New("mutex: unexpected reply from the acquire script")
			outcomes[i] = "error"
		case r.vals[0] == 0:
			answers[i] = ErrNotAcquired
			remaining = max(remaining, time.Duration(r.vals[2])*time.Millisecond)
			outcomes[i] = "held"
		default:
			voters = append(voters, i)
			tokens[i] = r.vals[1]
			if r.vals[0] == 2 {
				reentered++
			}
			outcomes[i] = "acquired"
		}
	}
	validity := lc.ttl - l.now().Sub(start) - l.drift(lc.ttl)
	recording := span.IsRecording()
	if recording {
		span.AddEvent("redlock.acquire", trace.WithAttributes(
			attribute.Int("redfence.redlock.votes", len(voters)),
			attribute.Int("redfence.redlock.quorum", l.quorum),
			attribute.String("redfence.redlock.nodes", strings.Join(outcomes, ",")),
			attribute.Float64("redfence.redlock.validity", validity.Seconds())))
	}

	if len(voters) >= l.quorum && validity > 0 {
		var chosen int64
		for _, i := range voters {
			chosen = max(chosen, tokens[i])
		}
		chosenStr := strconv.FormatInt(chosen, 10)
		agreed := true
		for _, i := range voters {
			agreed = agreed && tokens[i] == chosen
		}
		confirmed := len(voters)
		if !agreed {
			raised := l.fanout(ctx, timeout, voters, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
				n, err := raiseScript.Run(ctx, c, keys, owner, chosenStr).Int64()
				return []int64{n}, err
			})
			confirmed = 0
			for _, i := range voters {
				if r := raised[i]; r.err == nil && len(r.vals) == 1 && r.vals[0] == 1 {
					confirmed++
					tokens[i] = chosen
				}
			}
		}
		validity = lc.ttl - l.now().Sub(start) - l.drift(lc.ttl)
		if recording {
			span.AddEvent("redlock.token", trace.WithAttributes(
				attribute.Bool("redfence.redlock.agreed", agreed),
				attribute.Int("redfence.redlock.confirmed", confirmed),
				attribute.Int64("redfence.token", chosen)))
		}
		if confirmed >= l.quorum && validity > 0 {
			// Nodes still answering may grant the lock late. One goroutine
			// waits for them; a node that granted with another token is
			// raised to the chosen one (with the proposal taken everywhere,
			// none is), so that Unlock's token matches there as well.
			var lateNodes []int
			for i, r := range replies {
				if r.pending != nil {
					lateNodes = append(lateNodes, i)
				}
			}
			var settled chan struct{}
			var lateDone []atomic.Bool
			if len(lateNodes) > 0 {
				settled = make(chan struct{})
				lateDone = make([]atomic.Bool, len(l.nodes))
				l.goBg(func() {
					defer close(settled)
					for _, i := range lateNodes {
						r := replies[i]
						err := <-r.pending
						if v := *r.late; err == nil && len(v) == 3 && v[0] != 0 && v[1] != chosen {
							ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
							_ = raiseScript.Run(ctx, l.nodes[i], keys, owner, chosenStr).Err()
							cancel()
						}
						lateDone[i].Store(true)
					}
				})
			}
			status := int64(1)
			if reentered >= l.quorum {
				status = 2
			}
			res := acquireResult{status: status, token: chosen, lateNodes: lateNodes, lateDone: lateDone}
			if settled != nil {
				res.settled = settled
			}
			return res, nil
		}
	}

	// No lock: give back what this attempt took, at once, on every node.
	l.redlockGiveBack(lockKey, owner, lc.owner != "", voters, tokens, replies)
	qerr := &QuorumError{Quorum: l.quorum, Addrs: slices.Clone(l.addrs), Nodes: answers, Late: len(voters) >= l.quorum}
	if qerr.outage() {
		// Too few nodes answered to call it contention.
		return acquireResult{}, qerr
	}
	if remaining == 0 {
		remaining = lc.retryMin
	}
	return acquireResult{status: 0, remaining: remaining, why: qerr}, nil
}

// redlockGiveBack releases a failed attempt's partial acquisitions: exactly
// (owner and token) on the nodes that granted it; on nodes that did not
// answer, after their call ended, by owner, when the owner id is this
// attempt's own (an explicit WithOwner id may hold the lock elsewhere; its
// lease runs out instead).
func (l *Locker) redlockGiveBack(lockKey, owner string, explicitOwner bool, voters []int, tokens []int64, replies []nodeReply) {
	keys := []string{lockKey, channelOf(lockKey)}
	for _, i := range voters {
		c, tok := l.nodes[i], strconv.FormatInt(tokens[i], 10)
		l.afterward(nil, func(ctx context.Context) {
			_ = releaseScript.Run(ctx, c, l.releaseKeys(lockKey), l.releaseArgs(owner, tok)...).Err()
		})
	}
	if explicitOwner {
		return
	}
	for i, r := range replies {
		if r.pending == nil {
			continue
		}
		c := l.nodes[i]
		l.afterward(r.pending, func(ctx context.Context) {
			_ = abandonScript.Run(ctx, c, keys, owner, l.keyTTL(0), l.publish).Err()
		})
	}
}

// redlockRelease takes one count on every node. It returns the largest count
// left (0: freed), -1 when no node held the lock, or an error when no node
// confirmed and some failed.
func (l *Locker) redlockRelease(ctx context.Context, lk *Lock, nodes []int) (int64, error) {
	keys := lk.keys()
	// Done once a majority released: no quorum can form for the old holder
	// any more, and the other nodes finish in the background.
	decided := func(out []nodeReply, answered []bool) bool {
		freed := 0
		for i, r := range out {
			if answered[i] && r.err == nil && len(r.vals) == 1 && r.vals[0] == 0 {
				freed++
			}
		}
		return freed >= l.quorum
	}
	replies := l.fanoutUntil(ctx, l.nodeTimeout(lk.ttl), nodes, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		n, err := releaseScript.Run(ctx, c, keys, l.releaseArgs(lk.owner, lk.tokenStr)...).Int64()
		return []int64{n}, err
	}, decided)
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
		return 0, errors.Join(errs...)
	}
	return left, nil
}

// redlockExtend sets the lease on every node. It reports held when a majority
// extended within the validity, gone when a majority said the lock is not
// theirs (or too few could still confirm), and unknown otherwise; why says,
// node by node, what kept an unknown one from a majority (ErrUnavailable).
func (l *Locker) redlockExtend(ctx context.Context, locks []*Lock, ttls []time.Duration) (results []renewOutcome, sent time.Time, why error) {
	sent = l.now()
	timeout := l.nodeTimeout(slices.Min(ttls))
	calls := l.extendCalls(locks, ttls)
	replies := l.fanout(ctx, timeout, allNodes(len(l.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		cmds, err := runScripts(ctx, c, extendScript, calls, nil) // each command's own reply says how it went
		return replyInts(cmds), err
	})
	results = make([]renewOutcome, len(locks))
	for j := range locks {
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
		valid := ttls[j]-l.now().Sub(sent)-l.drift(ttls[j]) > 0
		switch {
		case yes >= l.quorum && valid:
			results[j] = renewHeld
		case no > len(l.nodes)-l.quorum:
			results[j] = renewGone // a majority can no longer confirm
		default:
			results[j] = renewUnknown
		}
	}
	var errs []error
	for i, r := range replies {
		if r.err != nil {
			errs = append(errs, fmt.Errorf("node %s: %w", l.nodeName(i), r.err))
		}
	}
	why = unavailable(fmt.Errorf("%w: %w", errNoMajority, errors.Join(errs...)))
	if len(errs) == 0 {
		why = unavailable(fmt.Errorf("%w in time: the validity ran out", errNoMajority))
	}
	return results, sent, why
}

type renewOutcome int

const (
	renewUnknown renewOutcome = iota
	renewHeld
	renewGone
)

// redlockTTL is the lease a majority still guarantees: the quorum-th longest
// remaining lease over the nodes that hold the lock.
func (l *Locker) redlockTTL(ctx context.Context, lk *Lock) (time.Duration, error) {
	keys := []string{lk.lockKey}
	replies := l.fanout(ctx, l.nodeTimeout(lk.ttl), allNodes(len(l.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		n, err := ttlScript.Run(ctx, c, keys, lk.owner, lk.tokenStr).Int64()
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
	if len(left) >= l.quorum {
		slices.Sort(left)
		slices.Reverse(left)
		return time.Duration(left[l.quorum-1]) * time.Microsecond, nil
	}
	if len(left)+len(errs) >= l.quorum {
		return 0, errors.Join(errs...) // cannot tell
	}
	return -1, nil
}

// redlockReleaseAll releases locks on every node, pipelined per node, each
// node bounded by timeout (Close).
func (l *Locker) redlockReleaseAll(ctx context.Context, timeout time.Duration, locks []*Lock) error {
	calls := l.releaseCalls(locks)
	replies := l.fanout(ctx, timeout, allNodes(len(l.nodes)), func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
		_, err := runScripts(ctx, c, releaseScript, calls, nil)
		return nil, err
	})
	var errs []error
	for _, r := range replies {
		if r.err != nil && !errors.Is(r.err, redis.Nil) {
			errs = append(errs, r.err)
		}
	}
	if len(errs) > len(l.nodes)-l.quorum {
		return errors.Join(errs...)
	}
	return nil
}

// unsettled splits the nodes for an Unlock: those to release now, and
// those still answering the acquisition (late), to release once they have
// (releaseLate): a release sent now could reach such a node before the
// acquisition and find nothing, leaving it held until the lease ran out.
func (lk *Lock) unsettled() (now, later []int) {
	if lk.isSettled() {
		return allNodes(len(lk.l.nodes)), nil
	}
	for i := range lk.l.nodes {
		if slices.Contains(lk.lateNodes, i) && !lk.lateDone[i].Load() {
			later = append(later, i)
		} else {
			now = append(now, i)
		}
	}
	return now, later
}

// releaseLate releases lk, in the background, on nodes that granted it after
// the quorum was reached, once they carry its token (see unsettled). Each
// node is released once: a second release would take a second count of a
// re-entered lock.
func (l *Locker) releaseLate(lk *Lock, nodes []int) {
	l.goBg(func() {
		t := time.NewTimer(cleanupTimeout)
		defer t.Stop()
		select {
		case <-lk.settled:
		case <-t.C:
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		keys := lk.keys()
		l.fanout(ctx, cleanupTimeout, nodes, func(ctx context.Context, c redis.UniversalClient) ([]int64, error) {
			n, err := releaseScript.Run(ctx, c, keys, l.releaseArgs(lk.owner, lk.tokenStr)...).Int64()
			return []int64{n}, err
		})
	})
}
